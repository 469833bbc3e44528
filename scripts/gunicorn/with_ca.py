#!/usr/bin/env python3
"""A copy of a scenario whose clients trust a CA: scripts/gunicorn-check.sh --tls.

  with_ca.py SCENARIO CA_FILE OUT
  with_ca.py selftest

Writes OUT: SCENARIO's text with `--ca-cert CA_FILE` appended to the
client flags of every [[case]] (quoted for the storm's flag splitter, a
shell's words), everything else as it was. storm run takes no client
flags of its own, and a case's client flags are the only way its clients
(and the storm's check and calm wait, which read them) learn the CA.
Each case needs its client flags on one line (client = "..." or
'...'); OUT is read back and checked to hold every case's flags and the
CA's, else it exits 1 with why, writing nothing. selftest checks that on
scenarios written here, with the texts they must give worked out by
hand, and exits 1 if one differs.
"""

import json
import re
import shlex
import sys
import tomllib

CLIENT = re.compile(r"""^(\s*)client\s*=\s*("(?:[^"\\]|\\.)*"|'[^']*')\s*(#.*)?$""")
TABLE = re.compile(r"^\s*\[")
CASE = re.compile(r"^\s*\[\[\s*case\s*\]\]\s*(#.*)?$")


def with_ca(text, ca):
    """The scenario's text with --ca-cert CA after each case's client flags."""
    cases = tomllib.loads(text).get("case", [])
    extra = " --ca-cert " + shlex.quote(ca)
    lines = text.splitlines(keepends=True)
    in_case = False
    index = 0
    for i, line in enumerate(lines):
        if TABLE.match(line):
            in_case = bool(CASE.match(line))
            if in_case:
                index += 1
            continue
        m = CLIENT.match(line)
        if in_case and m and index <= len(cases):
            flags = cases[index - 1]["client"] + extra
            lines[i] = "%sclient = %s%s\n" % (m.group(1), json.dumps(flags), (
                " " + m.group(3)) if m.group(3) else "")
    out = "".join(lines)
    got = tomllib.loads(out).get("case", [])
    wanted = [dict(c, client=c.get("client", "") + extra) for c in cases]
    if got != wanted:
        missed = [c.get("name", "#%d" % (n + 1)) for n, (c, w) in enumerate(zip(got, wanted))
                  if c != w]
        raise ValueError("cases %s: no one-line client = \"...\" to add --ca-cert to"
                         % ", ".join(missed))
    return out


def selftest():
    """with_ca on known texts: what it must write, and what it must refuse."""
    good = (
        "seed = 1\n"
        "[protocol]\n"
        "pause = \"20s\"\n"
        "[[case]]\n"
        "name = \"a\"\n"
        "client = \"--clients 10 --strategy fixed\"  # ten\n"
        "[[ case ]]\n"
        "name = 'b'\n"
        "client = '--clients 1 -H \"X: y\"'\n"
    )
    wanted = (
        "seed = 1\n"
        "[protocol]\n"
        "pause = \"20s\"\n"
        "[[case]]\n"
        "name = \"a\"\n"
        "client = \"--clients 10 --strategy fixed --ca-cert '/t m/ca.pem'\" # ten\n"
        "[[ case ]]\n"
        "name = 'b'\n"
        "client = \"--clients 1 -H \\\"X: y\\\" --ca-cert '/t m/ca.pem'\"\n"
    )
    failed = []
    got = with_ca(good, "/t m/ca.pem")
    if got != wanted:
        failed.append("two cases: got %r, wanted %r" % (got, wanted))
    for name, text in [
        ("a case without client flags", "[[case]]\nname = \"a\"\n"),
        ("client flags over lines", "[[case]]\nname = \"a\"\nclient = \"\"\"\n--clients 3\"\"\"\n"),
    ]:
        try:
            failed.append("%s: accepted as %r" % (name, with_ca(text, "/ca.pem")))
        except ValueError:
            pass
    for line in failed:
        print("FAIL with_ca.py selftest: " + line)
    return 1 if failed else 0


def main(argv):
    if argv[1:] == ["selftest"]:
        return selftest()
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1], "rb") as f:
        text = f.read().decode()
    try:
        out = with_ca(text, argv[2])
    except (ValueError, tomllib.TOMLDecodeError) as e:
        sys.stderr.write("%s: %s\n" % (argv[1], e))
        return 1
    with open(argv[3], "w") as f:
        f.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
