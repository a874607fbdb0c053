"""Personal data: e-mail, IP addresses, card numbers, US SSN, IBAN, UK NINO,
national IDs and phone numbers.

Validation comes from the libraries (python-stdnum's checksums and formats,
phonenumbers' numbering plans, the stdlib's `ipaddress`); the own rules here
find the candidates and veto look-alikes (versions, dates, decimals, ISBNs).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

import phonenumbers
from stdnum import iban as std_iban
from stdnum import luhn as std_luhn
from stdnum.ca import sin as std_ca_sin
from stdnum.de import idnr as std_de_idnr
from stdnum.es import dni as std_es_dni
from stdnum.es import nie as std_es_nie
from stdnum.fr import nir as std_fr_nir
from stdnum.in_ import aadhaar as std_in_aadhaar
from stdnum.in_ import pan as std_in_pan
from stdnum.it import codicefiscale as std_it_cf
from stdnum.nl import bsn as std_nl_bsn
from stdnum.us import ssn as std_ssn

from services.shared.text.detectors.base import Finding

# ----------------------------------------------------------------------------- personal data

_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_IPV6 = re.compile(
    r"(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|\d{1,3}(?:\.\d{1,3}){3})?(?![0-9A-Za-z:])"
)
_IPV4 = re.compile(r"(?<![0-9A-Za-z.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![0-9]|\.[0-9])")
_VERSION_PREFIX = re.compile(
    r"(?i)(?:\bv|\bversion|\bver|\brelease|\bbuild|\bfirmware|\bkernel|\bchrome|\bfirefox|\bwindows|\bpython|==|>=|<=|~=)\s?$"
)
_CARD = re.compile(
    r"(?<![\w-])(?:[2-6]\d{12,18}|[2-6]\d{3}([ -])\d{4}\1\d{4}\1\d{1,7}|3\d{3}([ -])\d{6}\2\d{4,5})(?![\w]|-\d)"
)
_SSN = re.compile(r"(?<![\w-])\d{3}([- ])\d{2}\1\d{4}(?![\w]|-\d)")
_SSN_KEYWORD = re.compile(r"(?i)\b(?:ssn|social security(?: number| no\.?| #)?)\s*[:#]?\s*(\d{9})\b")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,32}")
# UK National Insurance number (HMRC's format): no library covers it.
_NINO = re.compile(
    r"(?<![A-Za-z0-9])(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]"
    r" ?\d{2} ?\d{2} ?\d{2} ?[A-D](?![A-Za-z0-9])"
)
_PHONE_CANDIDATE = re.compile(
    r"(?<![\w+./#-])(?:\+ ?|00 ?)?\(?\d(?:(?:[ \u00a0./-]|\) ?| ?\()?\d){6,15}(?![\w]|[-/]\d|\.\d)"
)
_PHONE_CONTEXT = re.compile(
    r"(?i)(?:phone|tel|mobile|cell|call|text me|sms|whatsapp|fax|contact|dial|ring|reach)\b[^\n]{0,24}$"
)
# The North American shape (415) 555-0132 / 415-555-0132 / 415.555.0132 is a phone number even in
# an area code not assigned yet: the plan's lengths (POSSIBLE) suffice, as for '+' numbers.
_NANP_SHAPE = re.compile(r"^(?:\([2-9]\d{2}\) ?|[2-9]\d{2}([-.]))[2-9]\d{2}(?(1)\1|[-.])\d{4}$")
_ZIP4 = re.compile(r"^\d{5}-\d{4}$")  # US ZIP+4
_DECIMAL = re.compile(r"^\d+\.\d+$|^0\.")  # 0.742004, 3.14159265
_ISBN_PREFIX = re.compile(r"(?i)\bISBN(?:-1[03])?:?\s*$")
_DATE_START = re.compile(r"^(?:\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4})")
_ZERO_REGIONS = ("GB", "DE", "FR", "IN", "IT", "NL", "AU", "JP", "BR", "CH", "AT", "BE")
_OTHER_REGIONS = ("US", "IN", "IT", "ES", "PL", "CN")


def _emails(view: str, out: list[Finding]) -> None:
    if "@" not in view:
        return
    for m in _EMAIL.finditer(view):
        if m.start() > 0 and view[m.start() - 1] in ":/":
            continue  # user:password@host is a URL's userinfo (url_credentials)
        local = m.group(0).split("@", 1)[0]
        if local == "git" and view[m.end() : m.end() + 1] == ":":
            continue  # git@github.com:org/repo.git is a remote, not a person
        out.append(Finding(m.start(), m.end(), "email"))


def _ips(view: str, out: list[Finding]) -> None:
    if ":" in view:
        for m in _IPV6.finditer(view):
            cand = m.group(0)
            groups = [g for g in re.split(r"[:.]", cand) if g]
            if len(groups) < 3 and sum(len(g) for g in groups) < 5:
                continue  # a[::2], 1::2: slices, not addresses
            try:
                addr = ipaddress.IPv6Address(cand)
            except ValueError:
                continue
            if not (addr.is_loopback or addr.is_unspecified):
                out.append(Finding(m.start(), m.end(), "ip"))
    if "." in view:
        for m in _IPV4.finditer(view):
            parts = [int(g) for g in m.groups()]
            if any(p > 255 for p in parts):
                continue
            if _VERSION_PREFIX.search(view, max(0, m.start() - 12), m.start()):
                continue
            if parts[0] == 127 or parts == [0, 0, 0, 0]:
                continue  # loopback and "any": the local machine, nobody's address
            out.append(Finding(m.start(), m.end(), "ip"))


def _card_iin(d: str) -> bool:
    """The card networks' issuer ranges and lengths (ISO/IEC 7812): Visa, Mastercard,
    Amex, Discover, JCB, Diners, UnionPay, Maestro. A compact timestamp or an order
    number of 13-19 digits mostly falls outside them."""
    n, p2, p3, p4 = len(d), int(d[:2]), int(d[:3]), int(d[:4])
    if d[0] == "4":
        return n in (13, 16, 19)
    if 51 <= p2 <= 55 or 2221 <= p4 <= 2720:
        return n == 16
    if p2 in (34, 37):
        return n == 15
    if d.startswith("6011") or p2 in (62, 65) or 644 <= p3 <= 649:
        return 16 <= n <= 19
    if 3528 <= p4 <= 3589:
        return 16 <= n <= 19
    if p2 in (36, 38, 39) or 300 <= p3 <= 305:
        return 14 <= n <= 19
    if p2 in (50, 56, 57, 58) or 60 <= p2 <= 69:
        return 12 <= n <= 19
    return False


def _numbers(view: str, out: list[Finding]) -> None:
    for m in _CARD.finditer(view):
        digits = re.sub(r"[ -]", "", m.group(0))
        if 13 <= len(digits) <= 19 and _card_iin(digits) and std_luhn.is_valid(digits):
            out.append(Finding(m.start(), m.end(), "card"))
    if "-" in view or " " in view:
        for m in _SSN.finditer(view):
            if std_ssn.is_valid(m.group(0).replace(" ", "-")):
                out.append(Finding(m.start(), m.end(), "us_ssn"))
    lowered = view.lower()
    if "ssn" in lowered or "social security" in lowered:
        for m in _SSN_KEYWORD.finditer(view):
            if std_ssn.is_valid(m.group(1)):
                out.append(Finding(m.start(1), m.end(1), "us_ssn"))


def _ibans(view: str, out: list[Finding]) -> None:
    for m in _IBAN.finditer(view):
        cand = m.group(0)
        # The longest prefix that is a valid IBAN (the pattern may run on into following words).
        best = compact = 0
        for i, c in enumerate(cand):
            if c == " ":
                continue
            compact += 1
            # mod 97-10 and the registry's BBAN structure; not the national check digits, which a
            # typed or partly made-up IBAN may lack while it still identifies an account holder
            if 15 <= compact <= 34 and std_iban.is_valid(cand[: i + 1], check_country=False):
                best = i + 1
        if best:
            out.append(Finding(m.start(), m.start() + best, "iban"))


def _ninos(view: str, out: list[Finding]) -> None:
    for m in _NINO.finditer(view):
        out.append(Finding(m.start(), m.end(), "uk_nino"))


# National identity numbers, each validated by python-stdnum (check digits, ranges).
# Formats that are specific on their own are matched anywhere; bare digit runs
# only after their name, which a person writes next to them.
_NATIONAL_IDS: tuple[tuple[str | None, re.Pattern[str], Callable[[str], bool]], ...] = (
    (None, re.compile(r"(?<![\d-])[2-9]\d{3} \d{4} \d{4}(?![\d-])"), std_in_aadhaar.is_valid),
    ("aadhaar", re.compile(r"(?i)aadhaar[^\n\d]{0,20}(\d{12})\b"), std_in_aadhaar.is_valid),
    (None, re.compile(r"(?<![A-Za-z0-9])[A-Z]{3}[ABCFGHLJPT][A-Z]\d{4}[A-Z](?![A-Za-z0-9])"), std_in_pan.is_valid),
    (None, re.compile(r"(?<![\d])[12] ?\d{2} ?\d{2} ?(?:\d{2}|2[AB]) ?\d{3} ?\d{3} ?\d{2}(?!\d)"), std_fr_nir.is_valid),
    (None, re.compile(r"(?<![A-Za-z0-9])\d{8}-?[A-Z](?![A-Za-z0-9])"), std_es_dni.is_valid),
    (None, re.compile(r"(?<![A-Za-z0-9])[XYZ]-?\d{7}-?[A-Z](?![A-Za-z0-9])"), std_es_nie.is_valid),
    (
        None,
        re.compile(r"(?<![A-Za-z0-9])[A-Z]{6}\d{2}[A-EHLMPR-T]\d{2}[A-Z]\d{3}[A-Z](?![A-Za-z0-9])"),
        std_it_cf.is_valid,
    ),
    (
        "sin",
        re.compile(r"(?i)\b(?:sin|social insurance(?: number)?)\b[^\n\d]{0,12}(\d{3}[- ]?\d{3}[- ]?\d{3})\b"),
        std_ca_sin.is_valid,
    ),
    (
        "steuer",
        re.compile(
            r"(?i)\b(?:steuer-?id(?:entifikationsnummer)?|idnr|tax id)\b[^\n\d]{0,12}(\d{2} ?\d{3} ?\d{3} ?\d{3})\b"
        ),
        std_de_idnr.is_valid,
    ),
    ("bsn", re.compile(r"(?i)\bbsn\b[^\n\d]{0,12}(\d{9})\b"), std_nl_bsn.is_valid),
)


def _national_ids(view: str, out: list[Finding]) -> None:
    lowered: str | None = None
    for hint, pattern, valid in _NATIONAL_IDS:
        if hint is not None:
            lowered = view.lower() if lowered is None else lowered
            if hint not in lowered and not (hint == "sin" and "social insurance" in lowered) \
                    and not (hint == "steuer" and ("idnr" in lowered or "tax id" in lowered)):
                continue
        for m in pattern.finditer(view):
            g = 1 if pattern.groups else 0
            if valid(m.group(g)):
                out.append(Finding(m.start(g), m.end(g), "national_id"))


def _phones(view: str, out: list[Finding]) -> None:
    for m in _PHONE_CANDIDATE.finditer(view):
        cand = m.group(0)
        s = m.start()
        if _DATE_START.match(cand) or _DECIMAL.match(cand.lstrip("(")) or _ZIP4.match(cand):
            continue
        if "/" in cand and "." in cand:
            continue  # a DOI (10.1137/140973463), a path of numbers
        if re.fullmatch(r"\d{1,3}(?: 000)+", cand):
            continue  # 256 000 000: thousands
        if _VERSION_PREFIX.search(view, max(0, s - 12), s) or _ISBN_PREFIX.search(view, max(0, s - 12), s):
            continue
        plus = cand[0] == "+" or cand.startswith("00")
        if len(re.findall(r"\d+", cand)) > (6 if plus else 5):
            continue  # 10 20 30 40 50 60: a list of numbers
        zero = cand.lstrip("(")[:1] == "0"
        separated = any(c in " .-()\u00a0" for c in cand.strip())
        context = _PHONE_CONTEXT.search(view, max(0, s - 40), s) is not None
        if not (plus or separated or context) and not (zero and len(cand) >= 9):
            continue  # a bare digit run (an order number, a timestamp, a short SHA) is not a phone number
        if cand.startswith("00"):
            regions: tuple[str, ...] = ("GB",)  # 00 is the international prefix outside North America
        elif plus:
            regions = ("US",)  # international: the region does not matter
        elif zero:
            regions = _ZERO_REGIONS
        else:
            regions = _OTHER_REGIONS
        # The matcher sees a little context after the candidate (its time-stamp rules read it).
        window = view[s : min(len(view), m.end() + 8)]
        found = False
        for region in regions:
            hits = [h for h in phonenumbers.PhoneNumberMatcher(window, region, leniency=phonenumbers.Leniency.VALID)
                    if h.start < len(cand)]
            if hits:
                out.extend(Finding(s + h.start, s + h.end, "phone") for h in hits)
                found = True
                break
        if not found and (plus or (separated and context) or _NANP_SHAPE.match(cand)):
            # An international number ('+' and a country code), or one after "Tel:", "phone", ...:
            # the numbering plan's length rules suffice (a range not yet assigned is still a number).
            for region in regions[:1] if plus else regions:
                hits = [
                    h
                    for h in phonenumbers.PhoneNumberMatcher(window, region, leniency=phonenumbers.Leniency.POSSIBLE)
                    if h.start < len(cand)
                ]
                if hits:
                    out.extend(Finding(s + h.start, s + h.end, "phone") for h in hits)
                    break
