//! TLS for what the networked engine serves: a certificate chain and its
//! key read from PEM files (`--tls-cert`, `--tls-key`) made into a
//! rustls acceptor on ring, offering by ALPN the protocols the server
//! speaks.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use super::tls::{ALPN_H2, ALPN_HTTP1, provider};
use crate::model::server::TlsFiles;

/// An acceptor serving `files`' certificate, offering h2 (if `http2`)
/// and http/1.1 by ALPN, or why it cannot be made, naming the flag and
/// file at fault.
pub fn acceptor(files: &TlsFiles, http2: bool) -> Result<TlsAcceptor, String> {
    let cert_flag = |e: &dyn std::fmt::Display| format!("--tls-cert {}: {e}", files.cert.display());
    let key_flag = |e: &dyn std::fmt::Display| format!("--tls-key {}: {e}", files.key.display());
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| cert_flag(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert_flag(&e))?;
    if certs.is_empty() {
        return Err(cert_flag(&"no PEM certificate in the file"));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| key_flag(&e))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        // The key does not match the certificate, or is of a kind ring
        // cannot sign with.
        .map_err(|e| key_flag(&e))?;
    config.alpn_protocols = if http2 {
        vec![ALPN_H2.to_vec(), ALPN_HTTP1.to_vec()]
    } else {
        vec![ALPN_HTTP1.to_vec()]
    };
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    /// A folder of its own under the system's temporary one, removed
    /// when dropped.
    struct Folder(PathBuf);

    impl Folder {
        fn new(name: &str) -> Folder {
            let path = std::env::temp_dir().join(format!(
                "retry-storm-server-tls-{name}-{}",
                std::process::id()
            ));
            std::fs::create_dir_all(&path).unwrap();
            Folder(path)
        }

        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, text).unwrap();
            path
        }
    }

    impl Drop for Folder {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn files(cert: &Path, key: &Path) -> TlsFiles {
        TlsFiles {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
        }
    }

    #[test]
    fn a_certificate_and_its_key_make_an_acceptor_offering_h2_first() {
        let dir = Folder::new("good");
        let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let cert = dir.write("cert.pem", &made.cert.pem());
        let key = dir.write("key.pem", &made.signing_key.serialize_pem());
        let acceptor = acceptor(&files(&cert, &key), true).unwrap();
        assert_eq!(
            acceptor.config().alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        let http1 = super::acceptor(&files(&cert, &key), false).unwrap();
        assert_eq!(http1.config().alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn a_missing_or_bad_file_names_its_flag() {
        let dir = Folder::new("bad");
        let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let cert = dir.write("cert.pem", &made.cert.pem());
        let key = dir.write("key.pem", &made.signing_key.serialize_pem());
        let wrong_key = dir.write("other.pem", &other.signing_key.serialize_pem());
        let garbage = dir.write("garbage.pem", "not a PEM file\n");
        let missing = dir.0.join("missing.pem");
        for (files, flag) in [
            (files(&missing, &key), "--tls-cert"),
            (files(&garbage, &key), "--tls-cert"),
            (files(&key, &key), "--tls-cert"),
            (files(&cert, &missing), "--tls-key"),
            (files(&cert, &garbage), "--tls-key"),
            (files(&cert, &cert), "--tls-key"),
            (files(&cert, &wrong_key), "--tls-key"),
        ] {
            let err = acceptor(&files, true).err().expect("refused");
            assert!(err.starts_with(flag), "{files:?}: {err}");
        }
    }
}
