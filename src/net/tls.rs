//! TLS for what the networked engine sends: the trust a client is given
//! (`--ca-cert`, `--insecure`, else the system's roots) made into a
//! rustls configuration, and a connection that is plain TCP or TLS over
//! it, with the protocol the server chose by ALPN.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, ring};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::model::wire::{Transport, Trust};

/// ALPN's name of HTTP/2.
pub const ALPN_H2: &[u8] = b"h2";

/// ALPN's name of HTTP/1.1.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// The cryptography every TLS configuration of the project uses: ring's.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// The client configuration for `trust`, offering by ALPN only the
/// protocol `transport` speaks (a server that cannot speak it fails the
/// handshake rather than answering in another).
pub fn client_config(trust: &Trust, transport: Transport) -> Result<rustls::ClientConfig, String> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let mut config = if trust.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(TrustAnything(provider())))
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(roots(trust.ca_cert.as_deref())?)
            .with_no_client_auth()
    };
    config.alpn_protocols = vec![match transport {
        Transport::Http1 => ALPN_HTTP1.to_vec(),
        Transport::Http2 => ALPN_H2.to_vec(),
    }];
    Ok(config)
}

/// The certificates to trust: those in the PEM file `ca_cert`, or the
/// system's.
fn roots(ca_cert: Option<&Path>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match ca_cert {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("--ca-cert {}: {e}", path.display()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("--ca-cert {}: {e}", path.display()))?;
            if certs.is_empty() {
                return Err(format!(
                    "--ca-cert {}: no PEM certificate in the file",
                    path.display()
                ));
            }
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| format!("--ca-cert {}: {e}", path.display()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err("no system CA certificates found: give --ca-cert or --insecure".into());
            }
        }
    }
    Ok(roots)
}

/// `--insecure`: any certificate for any name, the handshake's signatures
/// still checked (they prove nothing without a trusted certificate, but
/// an unchecked one would let a broken server pass).
#[derive(Debug)]
struct TrustAnything(Arc<CryptoProvider>);

impl ServerCertVerifier for TrustAnything {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// How a client reaches a host: in clear, or by TLS with the name its
/// certificate must hold.
#[derive(Clone)]
pub enum Dialer {
    /// Plain TCP.
    Plain,
    /// TLS over TCP.
    Tls {
        /// The configured connector.
        connector: TlsConnector,
        /// The host's name (or address) as the URL wrote it.
        name: ServerName<'static>,
    },
}

impl Dialer {
    /// Plain for `http://`, TLS with `trust` for `https://` to `host`.
    pub fn new(
        https: bool,
        host: &str,
        trust: &Trust,
        transport: Transport,
    ) -> Result<Dialer, String> {
        if !https {
            return Ok(Dialer::Plain);
        }
        let config = client_config(trust, transport)?;
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| format!("'{host}' is not a name TLS can check: {e}"))?;
        Ok(Dialer::Tls {
            connector: TlsConnector::from(Arc::new(config)),
            name,
        })
    }

    /// Whether connections are TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self, Dialer::Tls { .. })
    }

    /// A connection on `tcp`, with the TLS handshake done if there is one.
    pub async fn dial(&self, tcp: TcpStream) -> io::Result<Stream> {
        let _ = tcp.set_nodelay(true);
        match self {
            Dialer::Plain => Ok(Stream::Plain(tcp)),
            Dialer::Tls { connector, name } => {
                let tls = connector.connect(name.clone(), tcp).await?;
                Ok(Stream::Tls(Box::new(tls)))
            }
        }
    }
}

/// A client's connection, in clear or TLS.
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// Whether the server chose HTTP/2 by ALPN (plain connections: never
    /// asked).
    pub fn alpn_h2(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(tls) => tls.get_ref().1.alpn_protocol() == Some(ALPN_H2),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpn_offers_only_the_protocol_asked_for() {
        let trust = Trust {
            ca_cert: None,
            insecure: true,
        };
        let h2 = client_config(&trust, Transport::Http2).unwrap();
        assert_eq!(h2.alpn_protocols, vec![b"h2".to_vec()]);
        let h1 = client_config(&trust, Transport::Http1).unwrap();
        assert_eq!(h1.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn a_missing_or_empty_ca_file_is_named_in_the_error() {
        let missing = Trust {
            ca_cert: Some("/nonexistent/ca.pem".into()),
            insecure: false,
        };
        let e = client_config(&missing, Transport::Http1).unwrap_err();
        assert!(e.contains("--ca-cert /nonexistent/ca.pem"), "{e}");
        let dir = std::env::temp_dir().join(format!("rs-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = client_config(
            &Trust {
                ca_cert: Some(empty),
                insecure: false,
            },
            Transport::Http1,
        )
        .unwrap_err();
        assert!(e.contains("no PEM certificate"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
