"""The planted test set: secrets, personal data and their look-alikes, built from
format specifications alone.

The generator knows how each kind is *written* (vendor key formats, RFCs,
numbering plans, ISO 13616, the Luhn rule, the SSA's ranges, HMRC's NINO
rules) and the realistic contexts they are pasted in (config files, shell
history, stack traces, chat, JSON, code, logs). It never imports or asks the
redaction's detectors: it is the test's ground truth, not a mirror of the rules.

`secrets(seed, per_kind)` -> `Planted` (kind, context, text, needles: the
strings that must not survive). `lookalikes(seed, per_kind)` -> `Lookalike`
(kind, context, text, value: the string that must survive unchanged).
Everything is seeded: the same seed gives the same set.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
BASE32 = string.ascii_uppercase + "234567"
HEX = "0123456789abcdef"
FIRST = ("james", "mary", "robert", "patricia", "john", "jennifer", "michael", "linda", "david", "elizabeth",
         "priya", "arjun", "sophie", "lukas", "camille", "hugo", "emma", "noah", "olivia", "liam", "mateo", "yuki")
LAST = ("smith", "johnson", "williams", "brown", "jones", "garcia", "miller", "davis", "martin", "bernard",
        "mueller", "schmidt", "sharma", "patel", "dubois", "rossi", "tanaka", "nguyen", "kowalski", "silva")
DOMAINS = ("gmail.com", "outlook.com", "yahoo.co.uk", "acme-corp.com", "initech.io", "globex.de", "example.org",
           "mail.fr", "proton.me", "company.co.in", "uni-heidelberg.de", "startup.ai")
HOSTS = ("db.internal", "prod-db-01.corp.local", "redis.svc.cluster.local", "10.0.3.17", "mq.acme-corp.com",
         "pg.eu-west-1.rds.amazonaws.com", "mongo-0.mongo", "ftp.initech.io")
WORDS = ("alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "maple", "cedar", "ember", "falcon", "harbor",
         "island", "jasmine", "kettle", "lantern", "meadow", "nebula", "orchid", "pepper", "quartz", "rocket",
         "saffron", "timber", "umbra", "velvet", "willow", "yonder", "zephyr", "copper", "silver", "orbit")


def _s(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choices(alphabet, k=n))


def filler(rng: random.Random, n: int = 14) -> str:
    """Random lower-case words: no two records are near duplicates of each other."""
    return " ".join(_s(rng, string.ascii_lowercase, rng.randint(4, 8)) for _ in range(n))


@dataclass(frozen=True)
class Planted:
    kind: str
    context: str
    text: str
    needles: tuple[str, ...]


@dataclass(frozen=True)
class Lookalike:
    kind: str
    context: str
    text: str
    value: str


# --------------------------------------------------------------------------- value formats

def luhn_complete(prefix_and_body: str) -> str:
    """Append the Luhn check digit."""
    total = 0
    for i, ch in enumerate(reversed(prefix_and_body)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return prefix_and_body + str((10 - total % 10) % 10)


def iban_check(country: str, bban: str) -> str:
    """ISO 13616 / ISO 7064 mod 97-10 check digits."""
    rearranged = bban + country + "00"
    numeric = "".join(str(int(c, 36)) for c in rearranged)
    return f"{98 - int(numeric) % 97:02d}"


# country: BBAN structure (n digits, a upper letters, c alphanumerics) from the IBAN registry
IBAN_FORMATS = {
    "DE": [("n", 8), ("n", 10)],
    "GB": [("a", 4), ("n", 6), ("n", 8)],
    "FR": [("n", 5), ("n", 5), ("c", 11), ("n", 2)],
    "NL": [("a", 4), ("n", 10)],
    "ES": [("n", 4), ("n", 4), ("n", 2), ("n", 10)],
    "IT": [("a", 1), ("n", 5), ("n", 5), ("c", 12)],
    "CH": [("n", 5), ("c", 12)],
    "AT": [("n", 5), ("n", 11)],
    "PL": [("n", 8), ("n", 16)],
    "IE": [("a", 4), ("n", 6), ("n", 8)],
}


def make_iban(rng: random.Random) -> str:
    country = rng.choice(sorted(IBAN_FORMATS))
    alpha = {"n": string.digits, "a": string.ascii_uppercase, "c": string.ascii_uppercase + string.digits}
    bban = "".join(_s(rng, alpha[t], n) for t, n in IBAN_FORMATS[country])
    compact = country + iban_check(country, bban) + bban
    if rng.random() < 0.6:
        return " ".join(compact[i : i + 4] for i in range(0, len(compact), 4))
    return compact


def make_card(rng: random.Random) -> str:
    brand = rng.choice(("visa", "mc", "mc2", "amex", "discover"))
    if brand == "amex":
        number = luhn_complete(rng.choice(("34", "37")) + _s(rng, string.digits, 12))
        style = rng.choice(("bare", "space", "dash"))
        if style == "bare":
            return number
        sep = " " if style == "space" else "-"
        return f"{number[:4]}{sep}{number[4:10]}{sep}{number[10:]}"
    prefix = {"visa": "4", "mc": str(rng.randint(51, 55)), "mc2": str(rng.randint(2221, 2720)), "discover": "6011"}[
        brand
    ]
    number = luhn_complete(prefix + _s(rng, string.digits, 15 - len(prefix)))
    style = rng.choice(("bare", "space", "dash"))
    if style == "bare":
        return number
    sep = " " if style == "space" else "-"
    return sep.join(number[i : i + 4] for i in range(0, 16, 4))


def make_ssn(rng: random.Random) -> str:
    area = rng.choice([a for a in range(1, 900) if a != 666])
    return f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


NINO_FIRST = "ABCEGHJKLMNOPRSTWXYZ"  # not D F I Q U V
NINO_SECOND = "ABCEGHJKLMNPRSTWXYZ"  # not D F I O Q U V
NINO_BANNED = {"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"}


def make_nino(rng: random.Random) -> str:
    while True:
        prefix = rng.choice(NINO_FIRST) + rng.choice(NINO_SECOND)
        if prefix not in NINO_BANNED:
            break
    digits = _s(rng, string.digits, 6)
    suffix = rng.choice("ABCD")
    if rng.random() < 0.5:
        return f"{prefix} {digits[:2]} {digits[2:4]} {digits[4:]} {suffix}"
    return f"{prefix}{digits}{suffix}"


def make_phone(rng: random.Random, country: str) -> str:
    d = lambda n: _s(rng, string.digits, n)  # noqa: E731
    if country == "uk":
        kind = rng.choice(("london", "mobile", "manchester"))
        if kind == "london":
            nsn = "20" + rng.choice("378") + d(7)
            national, intl = f"0{nsn[:2]} {nsn[2:6]} {nsn[6:]}", f"+44 {nsn[:2]} {nsn[2:6]} {nsn[6:]}"
        elif kind == "manchester":
            nsn = "161" + rng.choice("2345789") + d(6)
            national, intl = f"0{nsn[:3]} {nsn[3:6]} {nsn[6:]}", f"+44 {nsn[:3]} {nsn[3:6]} {nsn[6:]}"
        else:  # Ofcom mobile ranges 071-075, 077-079
            nsn = "7" + rng.choice("4578") + d(8)
            national, intl = f"0{nsn[:4]} {nsn[4:]}", f"+44 {nsn[:4]} {nsn[4:]}"
    elif country == "de":
        kind = rng.choice(("berlin", "munich", "mobile"))
        if kind == "berlin":
            nsn = "30" + rng.choice("2345689") + d(7)
            national, intl = f"030 {nsn[2:]}", f"+49 30 {nsn[2:]}"
        elif kind == "munich":
            nsn = "89" + rng.choice("2345689") + d(7)
            national, intl = f"(089) {nsn[2:]}", f"+49 89 {nsn[2:]}"
        else:
            pre = rng.choice(("151", "152", "160", "170", "171", "172", "175", "176", "177"))
            nsn = pre + d(8 if pre[:2] in ("15", "17") else 7)
            national, intl = f"0{pre} {nsn[3:]}", f"+49 {pre} {nsn[3:]}"
    elif country == "fr":
        first = rng.choice("123456789"[:5] + "67")
        rest = d(8)
        groups = [rest[i : i + 2] for i in range(0, 8, 2)]
        national = f"0{first} " + " ".join(groups)
        if rng.random() < 0.5:
            national = national.replace(" ", ".")
        intl = f"+33 {first} " + " ".join(groups)
    elif country == "us":
        area = f"{rng.randint(2, 9)}{rng.randint(0, 8)}{rng.randint(0, 9)}"
        while True:
            exchange = f"{rng.randint(2, 9)}{rng.randint(0, 9)}{rng.randint(0, 9)}"
            if exchange[1:] != "11":
                break
        line = d(4)
        national = rng.choice((f"({area}) {exchange}-{line}", f"{area}-{exchange}-{line}", f"{area}.{exchange}.{line}"))
        intl = rng.choice(
            (f"+1 {area} {exchange} {line}", f"+1-{area}-{exchange}-{line}", f"+1 ({area}) {exchange}-{line}")
        )
    elif country == "in":
        if rng.random() < 0.6:  # mobiles: 10 digits starting 6-9
            nsn = rng.choice("6789") + d(9)
            national = rng.choice((f"0{nsn[:5]} {nsn[5:]}", f"{nsn[:5]} {nsn[5:]}"))
            intl = rng.choice((f"+91 {nsn[:5]} {nsn[5:]}", f"+91-{nsn}", f"+91 {nsn}"))
        else:  # Mumbai / Delhi landlines
            city = rng.choice(("22", "11"))
            nsn = city + rng.choice("2346") + d(7)
            national, intl = f"0{city} {nsn[2:6]} {nsn[6:]}", f"+91-{city}-{nsn[2:6]}-{nsn[6:]}"
    else:
        raise ValueError(country)
    return national if rng.random() < 0.5 else intl


def make_password(rng: random.Random) -> str:
    symbols = "!#$%&*+-.=?@^_~"
    n = rng.randint(10, 20)
    chars = [rng.choice(string.ascii_lowercase), rng.choice(string.ascii_uppercase), rng.choice(string.digits)]
    chars += rng.choices(ALNUM + symbols, k=n - 3)
    rng.shuffle(chars)
    pw = "".join(chars)
    return pw if pw[0] in ALNUM else "a" + pw  # YAML/shell-safe first character, as people type them


def make_url_password(rng: random.Random) -> str:
    # RFC 3986 userinfo: unreserved characters (percent-encoding aside)
    return _s(rng, ALNUM, rng.randint(8, 12)) + _s(rng, ALNUM + "-._~", rng.randint(2, 8))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_jwt(rng: random.Random) -> str:
    header = {"alg": "HS256", "typ": "JWT"}
    payload = {"sub": str(rng.randint(10**6, 10**9)), "name": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
               "iat": rng.randint(1_600_000_000, 1_800_000_000), "scope": rng.choice(("read", "write", "admin"))}
    signing_input = f"{_b64url(json.dumps(header, separators=(',', ':')).encode())}." \
                    f"{_b64url(json.dumps(payload, separators=(',', ':')).encode())}"
    sig = hmac.new(rng.randbytes(32), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64url(sig)}"


def make_pem(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    """A real private key (seeded: EC from a seeded scalar, Ed25519 from seeded bytes,
    with `cryptography`), or a structurally valid RSA / OpenSSH PEM body."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    style = rng.choice(("ec_pkcs8", "ec_sec1", "ed25519_pkcs8", "rsa_body", "openssh_body"))
    if style in ("rsa_body", "openssh_body"):
        # cryptography cannot seed an RSA key, and its OpenSSH writer adds random check bytes:
        # a structurally valid body (the format's magic, then seeded bytes) instead.
        head, label, size, width = {
            "rsa_body": (b"\x30\x82\x04\xa4\x02\x01\x00\x02\x82\x01\x01\x00", "RSA PRIVATE KEY", 1180, 64),
            "openssh_body": (b"openssh-key-v1\x00\x00\x00\x00\x04none\x00\x00\x00\x04none", "OPENSSH PRIVATE KEY", 360, 70),
        }[style]
        body = base64.b64encode(head + rng.randbytes(size)).decode()
        lines = [body[i : i + width] for i in range(0, len(body), width)]
        pem = f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n"
    else:
        if style == "ed25519_pkcs8":
            key = ed25519.Ed25519PrivateKey.from_private_bytes(rng.randbytes(32))
            pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
        else:
            curve = ec.SECP256R1()
            ec_key = ec.derive_private_key(rng.randrange(1, 2**255), curve)
            fmt = (
                serialization.PrivateFormat.PKCS8
                if style == "ec_pkcs8"
                else serialization.PrivateFormat.TraditionalOpenSSL
            )
            pem = ec_key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()).decode()
        lines = [line for line in pem.splitlines() if line and not line.startswith("-----")]
    needles = tuple(line for line in lines if len(line) >= 16)
    return pem, needles


# --------------------------------------------------------------------------- contexts

def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


Gen = Callable[[random.Random], tuple[str, str, tuple[str, ...]]]  # -> (context, text, needles)


def _simple(make: Callable[[random.Random], str], contexts: dict[str, Callable[[random.Random, str], str]]) -> Gen:
    names = sorted(contexts)

    def gen(rng: random.Random) -> tuple[str, str, tuple[str, ...]]:
        value = make(rng)
        ctx = rng.choice(names)
        return ctx, contexts[ctx](rng, value), (value,)

    return gen


def _email(rng: random.Random) -> str:
    f, l = rng.choice(FIRST), rng.choice(LAST)  # noqa: E741
    local = rng.choice((f"{f}.{l}", f"{f}_{l}{rng.randint(1, 99)}", f"{f[0]}{l}", f"{f}.{l}+{rng.choice(WORDS)}"))
    return f"{local}@{rng.choice(DOMAINS)}"


def _ipv4(rng: random.Random) -> str:
    while True:
        a = rng.choice((rng.randint(1, 223), 10, 172, 192))
        if a in (127, 0):
            continue
        if a == 172:
            return f"172.{rng.randint(16, 31)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        if a == 192 and rng.random() < 0.5:
            return f"192.168.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        return f"{a}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


def _ipv6(rng: random.Random) -> str:
    import ipaddress

    groups = [f"{rng.randint(0x2001, 0x2c0f):x}"] + [f"{rng.randint(0, 0xffff):x}" for _ in range(7)]
    if rng.random() < 0.5:
        groups[3:6] = ["0", "0", "0"]
    addr = ipaddress.IPv6Address(":".join(groups))
    return addr.compressed if rng.random() < 0.7 else addr.exploded


def _chat(rng: random.Random, body: str) -> str:
    opener = rng.choice(("Hi, can you help me debug this?", "Why does this fail?", "Please review my setup:",
                         "I keep getting an error, here is what I have:", "Can you convert this to TOML?"))
    return f"{opener}\n\n{body}\n\n{filler(rng)}"


def secret_generators() -> dict[str, Gen]:
    g: dict[str, Gen] = {}

    def aws_key_id(rng: random.Random) -> str:
        return rng.choice(("AKIA", "ASIA")) + _s(rng, BASE32, 16)

    def aws_secret(rng: random.Random) -> str:
        return _s(rng, B64, 40)

    g["aws_access_key_id"] = _simple(aws_key_id, {
        "ini": lambda r, v: _chat(r, f"[default]\naws_access_key_id = {v}\nregion = eu-west-1"),
        "shell": lambda r, v: f"$ export AWS_ACCESS_KEY_ID={v}\n$ aws s3 ls\n{filler(r)}",
        "stacktrace": lambda r, v: (f"Traceback (most recent call last):\n  File \"sync.py\", line 12, in <module>\n"
                                    f"botocore.exceptions.ClientError: An error occurred (InvalidAccessKeyId) when calling "
                                    f"the ListBuckets operation: The AWS Access Key Id you provided does not exist: {v}\n{filler(r)}"),
        "json": lambda r, v: json.dumps({"AccessKeyId": v, "Status": "Active", "UserName": r.choice(WORDS), "note": filler(r)}),
    })

    def aws_secret_gen(rng: random.Random) -> tuple[str, str, tuple[str, ...]]:
        kid, secret = aws_key_id(rng), aws_secret(rng)
        ctx = rng.choice(("ini", "env", "json", "next_line", "boto3"))
        text = {
            "ini": f"~/.aws/credentials:\n[prod]\naws_access_key_id = {kid}\naws_secret_access_key = {secret}\n\n{filler(rng)}",
            "env": f"$ export AWS_ACCESS_KEY_ID={kid}\n$ export AWS_SECRET_ACCESS_KEY={secret}\n$ terraform apply\n{filler(rng)}",
            "json": json.dumps({"Credentials": {"AccessKeyId": kid, "SecretAccessKey": secret,
                                                "Expiration": "2025-01-01T00:00:00Z"}, "note": filler(rng)}, indent=2),
            "next_line": f"my keys are\n{kid}\n{secret}\nwhy does s3 say access denied? {filler(rng)}",
            "boto3": (f"import boto3\ns3 = boto3.client('s3', aws_access_key_id='{kid}',\n"
                      f"                  aws_secret_access_key='{secret}')\n# {filler(rng)}"),
        }[ctx]
        return ctx, text, (secret,)

    g["aws_secret_key"] = aws_secret_gen

    def tok(prefix: str, alphabet: str, n: int) -> Callable[[random.Random], str]:
        return lambda rng: prefix + _s(rng, alphabet, n)

    def env_like(var: str) -> dict[str, Callable[[random.Random, str], str]]:
        return {
            "shell": lambda r, v: f"$ export {var}={v}\n$ ./run.sh --verbose\n{filler(r)}",
            "dotenv": lambda r, v: _chat(r, f"# .env\nDEBUG=false\n{var}={v}\nPORT=8080"),
            "yaml": lambda r, v: _chat(r, f"env:\n  - name: {var}\n    value: \"{v}\"\n  - name: LOG_LEVEL\n    value: info"),
            "chat": lambda r, v: f"I pasted my key {v} into the settings but it still says unauthorized. {filler(r)}",
            "json": lambda r, v: json.dumps({"name": r.choice(WORDS), "config": {var.lower(): v}, "note": filler(r)}),
        }

    g["github_token"] = _simple(tok("ghp_", ALNUM, 36), {
        **env_like("GITHUB_TOKEN"),
        "git_remote": lambda r, v: f"$ git remote set-url origin https://{v}@github.com/{r.choice(WORDS)}/{r.choice(WORDS)}.git\n{filler(r)}",
        "curl": lambda r, v: f"curl -H \"Authorization: token {v}\" https://api.github.com/user/repos\n{filler(r)}",
    })
    g["github_fine_grained_pat"] = _simple(lambda r: "github_pat_" + _s(r, ALNUM, 22) + "_" + _s(r, ALNUM, 59),
                                           env_like("GH_TOKEN"))
    g["gitlab_token"] = _simple(tok("glpat-", B64URL, 20), {
        **env_like("GITLAB_TOKEN"),
        "ci": lambda r, v: _chat(r, f"variables:\n  PRIVATE_TOKEN: {v}\nscript:\n  - curl --header \"PRIVATE-TOKEN: {v}\" https://gitlab.example.com/api/v4/projects"),
    })

    def slack_tok(rng: random.Random) -> str:
        return f"{rng.choice(('xoxb', 'xoxp'))}-{_s(rng, string.digits, 11)}-{_s(rng, string.digits, 12)}-{_s(rng, ALNUM, 24)}"

    g["slack_token"] = _simple(slack_tok, env_like("SLACK_BOT_TOKEN"))

    def webhook(rng: random.Random) -> str:
        return (f"https://hooks.slack.com/services/T{_s(rng, string.ascii_uppercase + string.digits, 8)}/"
                f"B{_s(rng, string.ascii_uppercase + string.digits, 10)}/{_s(rng, ALNUM, 24)}")

    g["slack_webhook"] = _simple(webhook, {
        "curl": lambda r, v: f"curl -X POST -H 'Content-type: application/json' --data '{{\"text\":\"deploy done\"}}' {v}\n{filler(r)}",
        "yaml": lambda r, v: _chat(r, f"alerting:\n  slack:\n    url: {v}\n    channel: \"#ops\""),
        "python": lambda r, v: f"import requests\nWEBHOOK = \"{v}\"\nrequests.post(WEBHOOK, json={{'text': 'hi'}})\n# {filler(r)}",
        "chat": lambda r, v: f"our alerts go to {v} but nothing arrives. {filler(r)}",
    })
    g["stripe_key"] = _simple(lambda r: r.choice(("sk_live_", "rk_live_")) + _s(r, ALNUM, r.choice((24, 99))),
                              {**env_like("STRIPE_SECRET_KEY"),
                               "python": lambda r, v: f"import stripe\nstripe.api_key = \"{v}\"\nstripe.Charge.list(limit=3)\n# {filler(r)}"})
    g["huggingface_token"] = _simple(tok("hf_", ALNUM, 34), {
        **env_like("HF_TOKEN"),
        "cli": lambda r, v: f"$ huggingface-cli login --token {v}\nToken is valid (permission: write).\n{filler(r)}",
        "python": lambda r, v: f"from huggingface_hub import login\nlogin(token=\"{v}\")\n# {filler(r)}",
    })

    def azure_key(rng: random.Random) -> str:
        return base64.b64encode(rng.randbytes(64)).decode()

    g["azure_storage_key"] = _simple(azure_key, {
        "connection_string": lambda r, v: _chat(r, f"DefaultEndpointsProtocol=https;AccountName={r.choice(WORDS)}store;AccountKey={v};EndpointSuffix=core.windows.net"),
        "appsettings_json": lambda r, v: json.dumps({"ConnectionStrings": {"Storage": f"DefaultEndpointsProtocol=https;AccountName=acct{r.randint(1, 99)};AccountKey={v};EndpointSuffix=core.windows.net"}, "note": filler(r)}, indent=2),
        "env": lambda r, v: f"$ export AZURE_STORAGE_KEY={v}\n$ az storage blob list -c logs\n{filler(r)}",
        "az_cli_json": lambda r, v: "$ az storage account keys list -n acct\n" + json.dumps([{"keyName": "key1", "permissions": "FULL", "value": v}], indent=2) + f"\n{filler(r)}",
    })
    g["google_api_key"] = _simple(tok("AIza", B64URL, 35), {
        **env_like("GOOGLE_API_KEY"),
        "url": lambda r, v: f"GET https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key={v} returned 403\n{filler(r)}",
    })
    g["jwt"] = _simple(make_jwt, {
        "header": lambda r, v: f"curl -H \"Authorization: Bearer {v}\" https://api.acme-corp.com/v1/me\n{filler(r)}",
        "cookie": lambda r, v: f"Request headers:\nCookie: session={v}; theme=dark\nUser-Agent: curl/8.4\n{filler(r)}",
        "json": lambda r, v: json.dumps({"access_token": v, "token_type": "bearer", "expires_in": 3600, "note": filler(r)}),
        "chat": lambda r, v: f"this token {v} is rejected with invalid signature, why? {filler(r)}",
    })

    def pem_gen(rng: random.Random) -> tuple[str, str, tuple[str, ...]]:
        pem, needles = make_pem(rng)
        ctx = rng.choice(("raw_chat", "yaml_block", "json_string", "heredoc"))
        text = {
            "raw_chat": f"Is this key format right?\n{pem}\n{filler(rng)}",
            "yaml_block": f"apiVersion: v1\nkind: Secret\nstringData:\n  tls.key: |\n{_indent(pem, 4)}\n# {filler(rng)}",
            "json_string": json.dumps({"name": rng.choice(WORDS), "key": pem, "note": filler(rng)}),
            "heredoc": f"$ cat > deploy_key <<'EOF'\n{pem}EOF\n$ chmod 600 deploy_key\n{filler(rng)}",
        }[ctx]
        return ctx, text, needles

    g["private_key_pem"] = pem_gen

    def service_account(rng: random.Random, field: str) -> tuple[str, str, tuple[str, ...]]:
        key_id = _s(rng, HEX, 40)
        pem, needles = make_pem(rng)
        project = f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{rng.randint(100000, 999999)}"
        sa = {"type": "service_account", "project_id": project, "private_key_id": key_id, "private_key": pem,
              "client_email": f"{rng.choice(WORDS)}@{project}.iam.gserviceaccount.com",
              "client_id": str(rng.randint(10**20, 10**21 - 1)), "token_uri": "https://oauth2.googleapis.com/token"}
        ctx = rng.choice(("pretty_json", "compact_json", "python_dict", "chat_json"))
        if ctx == "pretty_json":
            text = json.dumps(sa, indent=2) + f"\n{filler(rng)}"
        elif ctx == "compact_json":
            text = f"GOOGLE_CREDENTIALS='{json.dumps(sa)}'\n{filler(rng)}"
        elif ctx == "python_dict":
            text = f"credentials = service_account.Credentials.from_service_account_info({json.dumps(sa, indent=4)})\n# {filler(rng)}"
        else:
            text = f"My credentials file looks like this, why does auth fail?\n```json\n{json.dumps(sa, indent=2)}\n```\n{filler(rng)}"
        return ctx, text, (key_id,) if field == "id" else needles

    g["gcp_private_key_id"] = lambda rng: service_account(rng, "id")
    g["gcp_private_key"] = lambda rng: service_account(rng, "key")

    g["password_config"] = _simple(make_password, {
        "yaml": lambda r, v: _chat(r, f"database:\n  host: {r.choice(HOSTS)}\n  user: app\n  password: {v}\n  pool: 5"),
        "yaml_quoted": lambda r, v: _chat(r, f"spring:\n  datasource:\n    username: admin\n    password: \"{v}\""),
        "ini": lambda r, v: _chat(r, f"[mysql]\nhost = {r.choice(HOSTS)}\nuser = root\npassword = {v}"),
        "env": lambda r, v: f"# .env\nPOSTGRES_USER=app\nPOSTGRES_PASSWORD={v}\nPOSTGRES_DB=prod\n{filler(r)}",
        "json": lambda r, v: json.dumps({"db": {"host": r.choice(HOSTS), "user": "svc", "password": v}, "note": filler(r)}, indent=2),
        "properties": lambda r, v: _chat(r, f"spring.datasource.url=jdbc:postgresql://{r.choice(HOSTS)}/app\nspring.datasource.password={v}"),
        "libpq_trace": lambda r, v: (f"psycopg2.OperationalError: connection to server failed\nDSN: host={r.choice(HOSTS)} "
                                     f"port=5432 dbname=app user=app password={v} sslmode=require\n{filler(r)}"),
        "compose": lambda r, v: _chat(r, f"services:\n  db:\n    image: postgres:16\n    environment:\n      - POSTGRES_PASSWORD={v}"),
    })
    g["password_cli"] = _simple(make_password, {
        "mysql": lambda r, v: f"$ mysql -h {r.choice(HOSTS)} -u root -p'{v}' app\nERROR 1045 (28000): Access denied\n{filler(r)}",
        "flag": lambda r, v: f"$ ./manage.py createsuperuser --username admin --password {v}\n{filler(r)}",
        "pgpassword": lambda r, v: f"$ PGPASSWORD={v} psql -h {r.choice(HOSTS)} -U app -d prod\n{filler(r)}",
        "curl_u": lambda r, v: f"$ curl -u admin:{v} https://jenkins.acme-corp.com/api/json\n{filler(r)}",
        "sshpass": lambda r, v: f"$ sshpass -p '{v}' ssh deploy@{r.choice(HOSTS)}\n{filler(r)}",
    })

    def url_creds(rng: random.Random) -> tuple[str, str, tuple[str, ...]]:
        user, pw = rng.choice(("app", "admin", "svc_etl", "root", rng.choice(FIRST))), make_url_password(rng)
        scheme, port = rng.choice((("postgresql", 5432), ("mysql", 3306), ("redis", 6379), ("mongodb", 27017),
                                   ("amqp", 5672), ("https", 443), ("ftp", 21)))
        if scheme == "redis" and rng.random() < 0.5:
            user = ""
        url = f"{scheme}://{user}:{pw}@{rng.choice(HOSTS)}:{port}/{rng.choice(WORDS)}"
        ctx = rng.choice(("env", "stacktrace", "yaml", "chat", "json"))
        text = {
            "env": f"DATABASE_URL={url}\n{filler(rng)}",
            "stacktrace": f"sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) could not connect\n(Background on this error at: {url})\n{filler(rng)}",
            "yaml": _chat(rng, f"broker:\n  url: {url}\n  retries: 3"),
            "chat": f"connecting with {url} times out, any idea? {filler(rng)}",
            "json": json.dumps({"dsn": url, "pool_size": 10, "note": filler(rng)}),
        }[ctx]
        return ctx, text, (pw,)

    g["url_credentials"] = url_creds
    g["openai_key"] = _simple(
        lambda r: r.choice(("sk-proj-" + _s(r, B64URL, 156), "sk-" + _s(r, ALNUM, 20) + "T3BlbkFJ" + _s(r, ALNUM, 20))),
        {
            **env_like("OPENAI_API_KEY"),
            "python": lambda r, v: f'from openai import OpenAI\nclient = OpenAI(api_key="{v}")\n# {filler(r)}',
        },
    )
    g["anthropic_key"] = _simple(lambda r: "sk-ant-api03-" + _s(r, B64URL, 93) + "AA", env_like("ANTHROPIC_API_KEY"))
    g["sendgrid_key"] = _simple(
        lambda r: "SG." + _s(r, B64URL, 22) + "." + _s(r, B64URL, 43), env_like("SENDGRID_API_KEY")
    )
    g["npm_token"] = _simple(tok("npm_", ALNUM, 36), {
        **env_like("NPM_TOKEN"),
        "npmrc": lambda r, v: f"# ~/.npmrc\n//registry.npmjs.org/:_authToken={v}\n{filler(r)}",
    })

    def opaque(rng: random.Random) -> str:
        return _s(rng, ALNUM, rng.randint(32, 48)) + _s(rng, ALNUM + "-._~", rng.randint(0, 12))

    g["bearer_token"] = _simple(opaque, {
        "curl": lambda r, v: f"curl -H 'Authorization: Bearer {v}' https://api.acme-corp.com/v2/items\n{filler(r)}",
        "http_dump": lambda r, v: f"GET /v2/items HTTP/1.1\nHost: api.acme-corp.com\nAuthorization: Bearer {v}\nAccept: */*\n\n{filler(r)}",
        "python": lambda r, v: f"headers = {{\"Authorization\": f\"Bearer {v}\", \"Accept\": \"application/json\"}}\n# {filler(r)}",
    })
    g["generic_api_key"] = _simple(lambda r: _s(r, ALNUM, r.choice((32, 40))), {
        "header": lambda r, v: f"curl -H \"X-API-Key: {v}\" https://api.weather.example/v1/today\n{filler(r)}",
        "yaml": lambda r, v: _chat(r, f"provider:\n  name: {r.choice(WORDS)}\n  api_key: {v}\n  timeout: 30"),
        "json": lambda r, v: json.dumps({"service": r.choice(WORDS), "apiKey": v, "note": filler(r)}),
        "python": lambda r, v: f"API_KEY = \"{v}\"\nresp = requests.get(URL, params={{'key': API_KEY}})\n# {filler(r)}",
    })

    # ---- personal data
    g["email"] = _simple(_email, {
        "signature": lambda r, v: f"{filler(r)}\n\nBest regards,\n{r.choice(FIRST).title()} {r.choice(LAST).title()}\n{v}",
        "json": lambda r, v: json.dumps({"id": r.randint(1, 99999), "email": v, "plan": "pro", "note": filler(r)}),
        "log": lambda r, v: f"2024-03-0{r.randint(1, 9)}T10:1{r.randint(0, 9)}:00Z INFO login ok user={v} ip=<redacted>\n{filler(r)}",
        "git": lambda r, v: f"commit {_s(r, HEX, 40)}\nAuthor: {r.choice(FIRST).title()} <{v}>\n\n    fix typo\n{filler(r)}",
        "csv": lambda r, v: f"name,email,city\n{r.choice(FIRST)},{v},{r.choice(('Paris', 'Leeds', 'Pune'))}\n{filler(r)}",
    })
    ip_contexts = {
        "nginx": lambda r, v: f'{v} - - [10/Oct/2024:13:55:36 +0000] "GET /api/v1/items HTTP/1.1" 200 2326\n{filler(r)}',
        "ssh": lambda r, v: f"$ ssh -i ~/.ssh/id_ed25519 ubuntu@{v}\nConnection timed out\n{filler(r)}",
        "json": lambda r, v: json.dumps({"client_ip": v, "status": 403, "note": filler(r)}),
        "stacktrace": lambda r, v: f"ConnectionRefusedError: [Errno 111] Connect call failed ('{v}', 5432)\n{filler(r)}",
    }
    g["ipv4"] = _simple(_ipv4, ip_contexts)
    g["ipv6"] = _simple(_ipv6, ip_contexts)
    g["card"] = _simple(make_card, {
        "chat": lambda r, v: f"My card {v} was charged twice, can you refund? {filler(r)}",
        "json": lambda r, v: json.dumps({"payment": {"card_number": v, "exp": "12/27", "amount": 49.99}, "note": filler(r)}),
        "log": lambda r, v: f"WARN payment declined card={v} reason=insufficient_funds\n{filler(r)}",
        "form": lambda r, v: f"Name: {r.choice(FIRST)} {r.choice(LAST)}\nCard number: {v}\nExpiry: 0{r.randint(1, 9)}/2{r.randint(5, 9)}\n{filler(r)}",
    })

    def ssn_gen(rng: random.Random) -> tuple[str, str, tuple[str, ...]]:
        ssn = make_ssn(rng)
        ctx = rng.choice(("form", "json", "chat", "bare_digits"))
        if ctx == "bare_digits":
            bare = ssn.replace("-", "")
            return ctx, f"Applicant SSN: {bare}\nDOB: 1985-04-12\n{filler(rng)}", (bare,)
        text = {
            "form": f"Employee: {rng.choice(FIRST)} {rng.choice(LAST)}\nSSN: {ssn}\nStart date: 2024-02-01\n{filler(rng)}",
            "json": json.dumps({"name": rng.choice(LAST), "ssn": ssn, "state": "CA", "note": filler(rng)}),
            "chat": f"my social security number is {ssn}, is it safe to send it here? {filler(rng)}",
        }[ctx]
        return ctx, text, (ssn,)

    g["us_ssn"] = ssn_gen
    g["iban"] = _simple(make_iban, {
        "chat": lambda r, v: f"Please transfer the deposit to IBAN {v} by Friday. {filler(r)}",
        "invoice": lambda r, v: f"INVOICE 2024-{r.randint(100, 999)}\nBank: {r.choice(WORDS).title()} Bank\nIBAN: {v}\nBIC: DEUTDEFF\n{filler(r)}",
        "json": lambda r, v: json.dumps({"beneficiary": r.choice(LAST), "iban": v, "amount": "1200.00", "note": filler(r)}),
        "csv": lambda r, v: f"payee;iban;amount\n{r.choice(LAST)};{v};300\n{filler(r)}",
    })
    for country in ("uk", "de", "fr", "us", "in"):
        g[f"phone_{country}"] = _simple(functools.partial(make_phone, country=country), {
            "chat": lambda r, v: f"You can reach me on {v} after 6pm. {filler(r)}",
            "signature": lambda r, v: f"{filler(r)}\n--\n{r.choice(FIRST).title()} {r.choice(LAST).title()}\nTel: {v}",
            "json": lambda r, v: json.dumps({"customer": r.choice(LAST), "phone": v, "note": filler(r)}),
            "csv": lambda r, v: f"name,phone,city\n{r.choice(FIRST)},{v},{r.choice(('Leeds', 'Lyon', 'Pune', 'Kiel'))}\n{filler(r)}",
        })
    g["uk_nino"] = _simple(make_nino, {
        "form": lambda r, v: f"Employee: {r.choice(FIRST)} {r.choice(LAST)}\nNational Insurance number: {v}\nTax code: 1257L\n{filler(r)}",
        "chat": lambda r, v: f"HMRC says my NI number {v} doesn't match, what should I do? {filler(r)}",
        "json": lambda r, v: json.dumps({"employee": r.choice(LAST), "nino": v, "note": filler(r)}),
    })
    return g


def secrets(seed: int = 16, per_kind: int = 100) -> list[Planted]:
    """`per_kind` planted instances of every secret and personal-data kind."""
    out: list[Planted] = []
    for kind, gen in sorted(secret_generators().items()):
        rng = random.Random(f"{seed}:{kind}")
        for _ in range(per_kind):
            context, text, needles = gen(rng)
            out.append(Planted(kind, context, text, needles))
    return out


# --------------------------------------------------------------------------- look-alikes

def _isbn13(rng: random.Random) -> str:
    body = rng.choice(("978", "979")) + _s(rng, string.digits, 9)
    total = sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(body))
    digits = body + str((10 - total % 10) % 10)
    return f"{digits[:3]}-{digits[3]}-{digits[4:8]}-{digits[8:12]}-{digits[12]}"


def _identifier(rng: random.Random) -> str:
    words = rng.sample(("user", "profile", "service", "factory", "handler", "request", "response", "manager",
                        "controller", "repository", "abstract", "default", "config", "builder", "provider",
                        "session", "cache", "token", "validator", "processor", "event", "listener"), rng.randint(4, 6))
    style = rng.choice(("camel", "snake", "test"))
    if style == "camel":
        return "".join(w.title() for w in words) + rng.choice(("", "2", "V2", "Impl"))
    if style == "snake":
        return "_".join(words) + rng.choice(("", "_v2", "_2"))
    return "test_" + "_".join(words) + f"_returns_{rng.choice((200, 404, 500))}"


def _hf_model(rng: random.Random) -> str:
    org = rng.choice(("meta-llama", "mistralai", "Qwen", "google", "microsoft", "HuggingFaceTB", "deepseek-ai"))
    name = rng.choice(("Llama", "Mistral", "Qwen2", "gemma", "Phi", "SmolLM2", "DeepSeek-Coder"))
    return f"{org}/{name}-{rng.randint(1, 3)}.{rng.randint(0, 9)}-{rng.choice((1, 7, 8, 13, 70))}B-{rng.choice(('Instruct', 'Chat', 'Base', 'it'))}"


def _b64_text(rng: random.Random) -> str:
    sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))).capitalize() + "."
    return base64.b64encode(sentence.encode()).decode()


def lookalike_generators() -> dict[
    str, tuple[Callable[[random.Random], str], dict[str, Callable[[random.Random, str], str]]]
]:
    import uuid as uuid_mod

    def uuid4(rng: random.Random) -> str:
        return str(uuid_mod.UUID(int=rng.getrandbits(128), version=4))

    L: dict[str, tuple[Callable[[random.Random], str], dict[str, Callable[[random.Random, str], str]]]] = {
        "uuid": (uuid4, {
            "json": lambda r, v: json.dumps({"request_id": v, "status": "ok", "note": filler(r)}),
            "log": lambda r, v: f"INFO trace_id={v} handled in 12ms\n{filler(r)}",
            "url": lambda r, v: f"GET /api/orders/{v} returned 404. {filler(r)}",
        }),
        "git_sha": (lambda r: _s(r, HEX, 40), {
            "log": lambda r, v: f"commit {v}\nAuthor: CI Bot\n\n    bump deps\n{filler(r)}",
            "checkout": lambda r, v: f"$ git checkout {v}\nHEAD is now at {v[:7]} fix build\n{filler(r)}",
            "json": lambda r, v: json.dumps({"sha": v, "ref": "refs/heads/main", "note": filler(r)}),
        }),
        "short_git_sha": (lambda r: _s(r, HEX, r.randint(7, 12)), {
            "revert": lambda r, v: f"$ git revert {v}\n{filler(r)}",
            "chat": lambda r, v: f"the regression started in {v}, can you bisect? {filler(r)}",
            "pin": lambda r, v: f"pip install git+https://github.com/org/repo@{v}\n{filler(r)}",
        }),
        "sha256_digest": (lambda r: "sha256:" + _s(r, HEX, 64), {
            "docker": lambda r, v: f"$ docker pull nginx@{v}\nStatus: Downloaded newer image\n{filler(r)}",
            "json": lambda r, v: json.dumps({"digest": v, "mediaType": "application/vnd.oci.image.manifest.v1+json", "note": filler(r)}),
            "pip": lambda r, v: f"torch==2.3.0 --hash={v}\n{filler(r)}",
        }),
        "sha256sum_line": (lambda r: _s(r, HEX, 64), {
            "shell": lambda r, v: f"$ sha256sum model.safetensors\n{v}  model.safetensors\n{filler(r)}",
            "chat": lambda r, v: f"the checksum should be {v} but I get something else. {filler(r)}",
            "json": lambda r, v: json.dumps({"file": "weights.bin", "sha256": v, "note": filler(r)}),
        }),
        "sri_integrity": (lambda r: "sha512-" + base64.b64encode(r.randbytes(64)).decode(), {
            "package_lock": lambda r, v: json.dumps({"node_modules/lodash": {"version": "4.17.21", "integrity": v}, "note": filler(r)}, indent=2),
            "html": lambda r, v: f'<script src="https://cdn.example.org/app.js" integrity="{v}" crossorigin="anonymous"></script>\n{filler(r)}',
            "yarn": lambda r, v: f'lodash@^4.17.21:\n  version "4.17.21"\n  integrity {v}\n{filler(r)}',
        }),
        "semver": (lambda r: r.choice((f"{r.randint(0, 20)}.{r.randint(0, 40)}.{r.randint(0, 30)}",
                                       f"v{r.randint(0, 9)}.{r.randint(0, 20)}.{r.randint(0, 9)}-rc.{r.randint(1, 5)}")), {
            "chat": lambda r, v: f"after upgrading to {v} the build breaks. {filler(r)}",
            "yaml": lambda r, v: f"image:\n  tag: {v}\n{filler(r)}",
            "json": lambda r, v: json.dumps({"name": "app", "version": v, "note": filler(r)}),
        }),
        "pinned_version": (lambda r: f"{r.choice(('numpy', 'torch', 'vllm', 'pydantic'))}=={r.randint(1, 3)}.{r.randint(0, 30)}.{r.randint(0, 9)}", {
            "requirements": lambda r, v: f"# requirements.txt\n{v}\nrequests>=2.31\n{filler(r)}",
            "shell": lambda r, v: f"$ pip install {v}\n{filler(r)}",
            "chat": lambda r, v: f"I pinned {v} and now imports fail. {filler(r)}",
        }),
        "four_part_version": (lambda r: f"version {r.randint(1, 12)}.{r.randint(0, 9)}.{r.randint(1000, 22000)}.{r.randint(1, 999)}", {
            "chat": lambda r, v: f"Windows {v} shows a blue screen. {filler(r)}",
            "log": lambda r, v: f"INFO agent {v} started\n{filler(r)}",
            "ini": lambda r, v: f"[agent]\n; {v}\nenabled = true\n{filler(r)}",
        }),
        "localhost_url": (lambda r: r.choice((f"http://localhost:{r.randint(3000, 9999)}/v1/chat/completions",
                                              f"http://127.0.0.1:{r.randint(3000, 9999)}/health",
                                              f"http://0.0.0.0:{r.randint(3000, 9999)}/metrics",
                                              f"http://[::1]:{r.randint(3000, 9999)}/")), {
            "curl": lambda r, v: f"$ curl {v}\ncurl: (7) Failed to connect\n{filler(r)}",
            "yaml": lambda r, v: f"endpoint: {v}\ntimeout_s: 30\n{filler(r)}",
            "chat": lambda r, v: f"vllm serves on {v} but the client hangs. {filler(r)}",
        }),
        "public_url": (lambda r: f"https://github.com/{r.choice(WORDS)}/{r.choice(WORDS)}/pull/{r.randint(1, 9999)}", {
            "chat": lambda r, v: f"see {v} for the fix. {filler(r)}",
            "markdown": lambda r, v: f"- [fix]({v})\n{filler(r)}",
            "json": lambda r, v: json.dumps({"html_url": v, "note": filler(r)}),
        }),
        "order_number": (lambda r: r.choice((f"ORD-{r.randint(2019, 2025)}-{r.randint(0, 999999):06d}",
                                             f"#{r.randint(100000, 999999)}", f"INV-{r.randint(10000, 99999)}")), {
            "chat": lambda r, v: f"my order {v} has not arrived yet. {filler(r)}",
            "json": lambda r, v: json.dumps({"order": v, "status": "shipped", "note": filler(r)}),
            "email": lambda r, v: f"Subject: Your order {v} is on its way\n\n{filler(r)}",
        }),
        "iso_timestamp": (lambda r: f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 999):03d}Z", {
            "log": lambda r, v: f"{v} ERROR worker crashed\n{filler(r)}",
            "json": lambda r, v: json.dumps({"created_at": v, "note": filler(r)}),
            "chat": lambda r, v: f"the job stopped at {v} exactly. {filler(r)}",
        }),
        "log_timestamp": (lambda r: f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} {r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d},{r.randint(0, 999):03d}", {
            "log": lambda r, v: f"{v} - uvicorn - INFO - started\n{filler(r)}",
            "trace": lambda r, v: f"[{v}] Traceback (most recent call last):\n  File \"app.py\", line 3\n{filler(r)}",
            "chat": lambda r, v: f"at {v} the queue filled up. {filler(r)}",
        }),
        "epoch": (lambda r: str(r.randint(1_500_000_000, 1_800_000_000)), {
            "json": lambda r, v: json.dumps({"ts": int(v), "event": "click", "note": filler(r)}),
            "log": lambda r, v: f"ts={v} level=info msg=flushed\n{filler(r)}",
            "chat": lambda r, v: f"convert {v} to a date please. {filler(r)}",
        }),
        "isbn": (_isbn13, {
            "chat": lambda r, v: f"the book ISBN {v} is out of stock. {filler(r)}",
            "bib": lambda r, v: f"@book{{key{r.randint(1, 999)},\n  isbn = {{{v}}},\n}}\n{filler(r)}",
            "json": lambda r, v: json.dumps({"isbn": v, "title": r.choice(WORDS), "note": filler(r)}),
        }),
        "password_prose": (lambda r: r.choice((
            "Reset your password from the settings page.", "The password must be at least 12 characters long.",
            "Forgot your password? We will send you a link.", "Never share your password with anyone.",
            "Password: must contain a digit and a symbol", "Change the default password after the first login.",
            "Use a password manager to generate strong passwords.", "If the password is wrong, the API returns 401.")), {
            "chat": lambda r, v: f"{v} {filler(r)}",
            "docs": lambda r, v: f"## Accounts\n\n{v}\n\n{filler(r)}",
            "email": lambda r, v: f"Hello,\n\n{v}\n\nThanks,\nSupport\n{filler(r)}",
        }),
        "password_code": (lambda r: r.choice((
            "password = get_password()", 'password = os.environ["DB_PASSWORD"]', "password = getpass.getpass()",
            "def login(username, password):", "if not password:", "password: str = Field(..., min_length=8)",
            "user.set_password(password)", "self.password = password", "client.login(user=user, password=password)",
            'password = request.form["password"]', "hashed = bcrypt.hashpw(password.encode(), salt)")), {
            "python": lambda r, v: f"```python\n{v}\n```\n{filler(r)}",
            "diff": lambda r, v: f"@@ -10,3 +10,4 @@\n+    {v}\n{filler(r)}",
            "chat": lambda r, v: f"why does `{v}` raise here? {filler(r)}",
        }),
        "password_template": (lambda r: r.choice((
            "password: ${DB_PASSWORD}", 'password: "{{ vault_db_password }}"', "PASSWORD=<your-password>",
            "password: !vault_ref db/password", "DB_PASSWORD=${DB_PASSWORD:?required}", "password: ''",
            "password: null", "api_key: YOUR_API_KEY")), {
            "yaml": lambda r, v: f"database:\n  {v}\n{filler(r)}",
            "chat": lambda r, v: f"is `{v}` the right way to template it? {filler(r)}",
            "docs": lambda r, v: f"Set the value as shown:\n\n    {v}\n\n{filler(r)}",
        }),
        "token_settings": (lambda r: r.choice((f"max_tokens: {r.randint(16, 8192)}", f"num_tokens={r.randint(16, 8192)}",
                                               f"tokenizer: {_hf_model(r)}", f"max_new_tokens = {r.randint(16, 4096)}",
                                               f"token_count: {r.randint(1, 99999)}")), {
            "yaml": lambda r, v: f"generation:\n  {v}\n  temperature: 0.7\n{filler(r)}",
            "chat": lambda r, v: f"with {v} the output is cut. {filler(r)}",
            "python": lambda r, v: f"# settings\n{v}\n{filler(r)}",
        }),
        "hf_model_id": (_hf_model, {
            "cli": lambda r, v: f"$ vllm serve {v} --max-model-len 8192\n{filler(r)}",
            "python": lambda r, v: f"model = AutoModelForCausalLM.from_pretrained(\"{v}\")\n# {filler(r)}",
            "chat": lambda r, v: f"is {v} good for code? {filler(r)}",
        }),
        "long_identifier": (_identifier, {
            "python": lambda r, v: f"def {v}(self):\n    return None\n# {filler(r)}",
            "java": lambda r, v: f"public class {v} implements Serializable {{}}\n// {filler(r)}",
            "stacktrace": lambda r, v: f"  at com.example.{v}.run(Main.java:42)\n{filler(r)}",
        }),
        "file_path": (lambda r: r.choice((f"/usr/lib/python3.{r.randint(8, 12)}/site-packages/{r.choice(WORDS)}/{r.choice(WORDS)}_{r.choice(WORDS)}.py",
                                          f"src/main/java/com/{r.choice(WORDS)}/{r.choice(WORDS)}/UserServiceImpl.java",
                                          f"/home/{r.choice(FIRST)}/projects/{r.choice(WORDS)}-{r.choice(WORDS)}/node_modules/.bin/webpack")), {
            "stacktrace": lambda r, v: f'  File "{v}", line {r.randint(1, 999)}, in load\n{filler(r)}',
            "chat": lambda r, v: f"the file {v} is missing. {filler(r)}",
            "shell": lambda r, v: f"$ ls -la {v}\n{filler(r)}",
        }),
        "mac_address": (lambda r: ":".join(f"{r.randint(0, 255):02X}" for _ in range(6)), {
            "ip_link": lambda r, v: f"2: eth0: <BROADCAST,MULTICAST,UP>\n    link/ether {v} brd ff:ff:ff:ff:ff:ff\n{filler(r)}",
            "chat": lambda r, v: f"the device with MAC {v} drops off wifi. {filler(r)}",
            "json": lambda r, v: json.dumps({"mac": v, "note": filler(r)}),
        }),
        "date": (lambda r: r.choice((f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}", f"{r.randint(1, 28):02d}/{r.randint(1, 12):02d}/2024",
                                     f"{r.randint(1, 28):02d}.{r.randint(1, 12):02d}.2023")), {
            "chat": lambda r, v: f"the deadline is {v}. {filler(r)}",
            "csv": lambda r, v: f"date,amount\n{v},12.50\n{filler(r)}",
            "json": lambda r, v: json.dumps({"due": v, "note": filler(r)}),
        }),
        "ssh_public_key": (lambda r: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + _s(r, B64, 43), {
            "authorized_keys": lambda r, v: f"# ~/.ssh/authorized_keys\n{v} deploy@laptop\n{filler(r)}",
            "chat": lambda r, v: f"I added {v} to GitHub but push still fails. {filler(r)}",
            "yaml": lambda r, v: f"users:\n  - name: ops\n    ssh_authorized_keys:\n      - {v}\n{filler(r)}",
        }),
        "base64_text": (_b64_text, {
            "docs": lambda r, v: f"For example, the header value `{v}` decodes to a plain sentence. {filler(r)}",
            "json": lambda r, v: json.dumps({"payload": v, "encoding": "base64", "note": filler(r)}),
            "shell": lambda r, v: f"$ echo {v} | base64 -d\n{filler(r)}",
        }),
        "numbers_in_code": (lambda r: r.choice((f"[{', '.join(str(r.randint(1, 999)) for _ in range(8))}]",
                                                f"x = {r.randint(100000, 9999999)} * {r.randint(2, 99)}",
                                                f"shape=({r.randint(1, 64)}, {r.randint(128, 4096)}, {r.randint(128, 4096)})",
                                                f"price ${r.randint(1, 9)},{r.randint(100, 999)}.{r.randint(10, 99)}")), {
            "python": lambda r, v: f"```python\n{v}\n```\n{filler(r)}",
            "chat": lambda r, v: f"why is {v} wrong? {filler(r)}",
            "log": lambda r, v: f"DEBUG value {v}\n{filler(r)}",
        }),
        "git_ssh_remote": (lambda r: f"git@github.com:{r.choice(WORDS)}/{r.choice(WORDS)}.git", {
            "shell": lambda r, v: f"$ git clone {v}\nPermission denied (publickey).\n{filler(r)}",
            "chat": lambda r, v: f"my remote is {v}, is that right? {filler(r)}",
            "ini": lambda r, v: f"[remote \"origin\"]\n\turl = {v}\n{filler(r)}",
        }),
        "bearer_prose": (lambda r: r.choice(("the bearer of bad news", "bearer bonds were popular", "Basic authentication is deprecated",
                                             "token-based auth is simpler", "a secret santa gift exchange")), {
            "chat": lambda r, v: f"I read about {v} today. {filler(r)}",
            "docs": lambda r, v: f"Note: {v}.\n{filler(r)}",
            "email": lambda r, v: f"Hi team,\n{v}.\n{filler(r)}",
        }),
    }
    return L


def lookalikes(seed: int = 16, per_kind: int = 40) -> list[Lookalike]:
    out: list[Lookalike] = []
    for kind, (make, contexts) in sorted(lookalike_generators().items()):
        rng = random.Random(f"{seed}:look:{kind}")
        names = sorted(contexts)
        for i in range(per_kind):
            value = make(rng)
            ctx = names[i % len(names)]
            out.append(Lookalike(kind, ctx, contexts[ctx](rng, value), value))
    return out
