"""Secrets found by what names them: keyword assignments, prose and command lines.

- keyword assignments on detect-secrets' keyword grammar (`password=`,
  `secret:`, `"token": ...`, YAML block values, .NET appSettings, XML
  elements, .netrc), with the value's extent and the code/template/prose
  vetoes (`_is_value`);
- prose: "my password is ...", "the key is ...";
- shell-history forms: `mysql -p...`, `docker login -p`, `sshpass -p`.
"""

from __future__ import annotations

import re

from detect_secrets.filters import heuristic
from detect_secrets.plugins import keyword as ds_keyword

from services.shared.text.detectors.base import Finding, _line_bounds, entropy
from services.shared.text.detectors.high_entropy import _HEXISH, looks_random

# ----------------------------------------------------------------------------- keyword assignments

# detect-secrets' keyword list plus what it lacks: token and API-key names, the
# short forms of passwords in env files (DB_PASS), credentials and passphrases.
_EXTRA_KEYWORDS = (
    r"(?<![a-z])pass(?![a-z])", r"passphrase", r"passcode", r"api[_-]?key", r"apikey", r"api[_-]?token",
    r"access[_-]?key", r"secret[_-]?key", r"(?<![a-z])token(?!iz)", r"credentials?", r"auth[_-]?token",
    r"access[_-]?token", r"refresh[_-]?token", r"requirepass", r"masterauth", r"client[_-]?secret", r"signing[_-]?key",
    r"encryption[_-]?key",
    r"master[_-]?key", r"kennwort", r"mot[_-]?de[_-]?passe",
)
_KEYWORD_ALT = "|".join(list(ds_keyword.DENYLIST) + list(_EXTRA_KEYWORDS))
_KEYWORD = re.compile(r"(?i)" + _KEYWORD_ALT)
# The prefilter: short literals every keyword above contains, searched in the lower-cased
# text (a plain alternation is 25x faster than the full one); a hit's whole name is then
# checked against `_KEYWORD`.
_KEYWORD_FAST = re.compile(r"pass|pwd|secret|key|token|cred|contrase|kennwort|mot.de|auth|masterauth")
_KEYWORD_FAST_I = re.compile(r"(?i)pass|pwd|secret|key|token|cred|contrase|kennwort|mot.de|auth|masterauth")
# An environment variable named *_KEY (AZURE_STORAGE_KEY, MAILGUN_KEY): a key, whatever the service.
_ENV_KEY_NAME = re.compile(r"[A-Z][A-Z0-9_]*_KEY")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-ñÑ")
# After NAME (its closing quote or bracket): the operator (the assignment forms of
# detect-secrets' keyword grammar), or one space before a CLI flag's value.
_AFTER_NAME = re.compile(r"[\"'`]?\]?(?P<op>\s*(?::=|=>|::|===?|!==?|:|=)\s*| +(?=\S))")
# Config files whose values follow a space: redis.conf (requirepass, masterauth), .netrc (password).
_SPACE_ASSIGNED = frozenset(("requirepass", "masterauth", "passwd"))
_NETRC = re.compile(r"(?m)^(?=.*\bmachine\b)(?=.*\blogin\b).*?\bpassword\s+(?P<v>\S+)")
# .NET appSettings: <add key="ApiKey" value="..."/>
_KEY_VALUE_ATTR = re.compile(
    r"(?i)\b(?:key|name)\s*=\s*[\"'](?P<k>[^\"']*(?:" + _KEYWORD_ALT
    + r")[^\"']*)[\"']\s+value\s*=\s*[\"'](?P<v>[^\"']+)[\"']"
)
_XML_SECRET = re.compile(
    r"(?i)<(?P<tag>[\w:.-]*(?:password|passwd|secret|token|api[_-]?key|private[_-]?key)[\w.-]*)>(?P<v>[^<\s]{4,})</(?P=tag)>"
)
# Names that hold a keyword but no secret: token counts, tokenizers, key types.
_NAME_STOP = re.compile(
    r"(?i)tokens\b|tokens_|_tokens|tokeniz|token_?(?:counts?|types?|ids?|len|length|limits?|usage|budget|index|bytes|bias|idx|"
    r"embed\w*|logprobs?|str|pos\w*|mask|level|span|stream|pool\w*|emb)(?![a-z])|"
    r"max_?token|num_?token|n_?token|keyword|keyboard|monkey|turkey|hotkey|keypair|keyfile|key_?file|"
    r"key_?path|password_?(?:file|path|policy|length|min|max|hash_algo|reset|field|hint|prompt|strength)|"
    r"secret_?(?:name|ref|file|path|id|arn|store|manager)|keys_?(?:path|dir)|passenger|passage|bypass|compass|"
    r"passive|passthrough|password_?changed|credentials?_?(?:file|path|provider|chain|source|type|helper)|"
    r"pass_?(?:through|rate|fail|count|k)\b|token_?endpoint|token_?url|_?is_|has_|needs_|use_|show_|"
    r"sort_?key|primary_?key|foreign_?key|public_?key|publishable_?key"
)
_CODE_ROOTS = frozenset(
    "self this cls config cfg conf settings os env environ args opts options params request req process ctx app "
    "props data user creds credentials secrets vault form payload body kwargs input values obj instance".split()
)
_NOT_VALUES = frozenset(
    "true false yes no on off none null nil undefined required optional empty str string int bytes bool text "
    "varchar char secretstr secretbytes any object number boolean password secret token key value redacted "
    "hidden masked omitted unset".split()
)
_TYPE_VALUE = re.compile(r"^(?:Optional|List|Union|SecretStr|str|bytes|String|&str|\*?string|\[\]byte)\b")
_PLACEHOLDER_VALUE = re.compile(
    r"(?i)^(?:your|my|the|insert|enter|put)[_ -]?\w*$|^x{3,}$|^\.{3,}$|^<.*>$|^%\(?\w+\)?s?$|^@@\w+@@$"
)
_CODE_AFTER = re.compile(r"\s*(?:[)\]|,]|->|[-+*/%&^<>]=?\s|=(?!=)|\bif\b|\belse\b|\bfor\b|\band\b|\bor\b)")
_UNQUOTED_END = re.compile(r"[\s,;}\])`]")
_QUERY_END = re.compile(r"[\s,;}\])`&#]")  # a value in a URL's query string ends at '&'



def _keyword_kind(name: str) -> str | None:
    n = name.lower()
    if _NAME_STOP.search(n):
        if "private_key_id" not in n and "private-key-id" not in n:
            return None
    if "private_key_id" in n or "private-key-id" in n or "privatekeyid" in n:
        return "private_key_id"
    if re.search(r"pass|pwd|contrase|kennwort|mot.de", n):
        return "password"
    if "aws" in n and "secret" in n:
        return "aws_secret_key"
    if "token" in n:
        return "token"
    if re.search(r"api.?key|apikey|access.?key|client.?key|auth.?key|service.?key|account.?key", n) or n.endswith(
        "_key"
    ):
        return "api_key"
    return "secret"


def _value_span(view: str, start: int, line_end: int, query: bool = False) -> tuple[int, int, bool, str]:
    """The value after an assignment: (start, end, quoted, what follows it)."""
    if start >= line_end:
        return start, start, False, ""
    q = view[start]
    if q in "bBrRuUfF" and view[start + 1 : start + 2] in ("'", '"') and start + 1 < line_end:
        start += 1  # b'...', r"...", f"...": a Python string literal
        q = view[start]
    if q in "\"'`":
        close = view.find(q, start + 1, line_end)
        end = line_end if close < 0 else close
        s, e = start + 1, end
        while s < e and view[s] == " ":
            s += 1
        while e > s and view[e - 1] == " ":  # the view's space before an escaped quote
            e -= 1
        return s, e, True, view[end + 1 : line_end]
    m = (_QUERY_END if query else _UNQUOTED_END).search(view, start, line_end)
    end = line_end if m is None else m.start()
    # A value may not end in a comma or closing bracket; it may hold '=', ':' and '#'.
    return start, end, False, view[end:line_end]


def _is_value(value: str, kind: str, name: str, line: str, *, quoted: bool, op: str, rest: str) -> bool:
    """Does `value`, assigned to `name`, look like a credential rather than code or prose?"""
    v = value.strip()
    if not v or v.lower() in _NOT_VALUES:
        return False
    if heuristic.is_templated_secret(v) or heuristic.is_prefixed_with_dollar_sign(v):
        return False
    if heuristic.is_not_alphanumeric_string(v) or _PLACEHOLDER_VALUE.match(v) or _TYPE_VALUE.match(v):
        return False
    if not quoted:
        if _CODE_AFTER.match(rest) and re.fullmatch(r"[A-Za-z_][\w.]*", v):
            return False  # an annotation or an expression: pm_pass: PatternMatcherPass) / x = a + b
        if op.strip() == "=" and op != "=" and sum(c.isdigit() for c in v) <= 1 \
                and re.fullmatch(r"[a-z_][a-z0-9_]*_[a-z0-9_]+|[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+", v):
            return False  # token_bytes = state_inner_size: a variable, in code
        if v[0] in "({[!" or "(" in v or "[" in v:
            return False  # a call, a literal, a tuple: code
        if heuristic.is_indirect_reference(f"{name} = {v}"):
            return False
        if v.startswith(("/", "./", "~/", "../")) and entropy(v) < 4.0:
            return False  # a path (PWD=/home/user)
    if "{{" in v or "${" in v or "%(" in v:
        return False
    dotted = v.split(".")
    if len(dotted) > 1 and all(re.fullmatch(r"[A-Za-z_]\w*", s) for s in dotted):
        if dotted[0].lower() in _CODE_ROOTS or any(
            k in dotted[-1].lower() for k in ("pass", "secret", "token", "key", "pwd")
        ):
            return False  # self.password, settings.SECRET_KEY
    bare = v.lower().lstrip("-")
    last = re.split(r"[.\-]", name.lower().strip("-\"'"))[-1]
    if bare == last or bare == name.lower().strip("-\"'"):
        return False  # password=password (a keyword argument)
    if re.fullmatch(r"[A-Z][A-Z_]*_[A-Z_]+|[a-z]+(?:_[a-z]+){2,}", v):
        return False  # a constant's name: MAGIC_TOKEN = 'RUN_ENTRY'
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", v) and any(k in v for k in ("PASS", "SECRET", "TOKEN", "KEY", "PWD")):
        return False  # an environment variable's name: password: DB_PASSWORD
    if kind != "password" and kind != "private_key_id" and heuristic.is_likely_id_string(v, line):
        return False
    if heuristic.is_sequential_string(v) and len(v) < 12:
        return False
    if v.isdigit():
        return kind == "password" and len(v) >= 6
    if kind == "password":
        if len(v) < 4:
            return False
    elif kind == "private_key_id":
        return len(v) >= 16 and re.fullmatch(r"[0-9a-fA-F]+", v) is not None
    else:
        if len(v) < 8:
            return False
        if not quoted and v.isalpha() and v.islower() and len(v) < 16 and op.strip() in (":", ""):
            return False  # token: expired, secret: rotated
    # Prose: "Password: must be at least 8 characters" -- a plain lower-case word
    # followed by more words, after a colon or a spaced '='.
    if not quoted and re.fullmatch(r"[a-z]+", v) and re.match(r"\s+[a-z]+\b", rest) and op != "=":
        return False
    return True


# A line that is only a key (YAML): `  tls.key: |`, `- secret:`, `"private_key":`.
_YAML_KEY_LINE = re.compile(r"[ \t]*(?:- )?[\"']?[\w.-]+[\"']?[ \t]*:[ \t]*(?:[|>][+-]?\d*)?[ \t]*(?:#.*)?$")
_YAML_BLOCK = re.compile(r"^[|>][+-]?\d*\s*(?:#.*)?$")


def _keywords(view: str, lowered: str, out: list[Finding]) -> None:
    hits = _KEYWORD_FAST.finditer(lowered) if len(lowered) == len(view) else _KEYWORD_FAST_I.finditer(view)
    n = len(view)
    done = -1  # the end of the last name looked at: a name holding two keywords is read once
    for m in hits:
        if m.start() < done:
            continue
        ns, ne = m.start(), m.end()
        while ns > 0 and view[ns - 1] in _NAME_CHARS:
            ns -= 1
        while ne < n and view[ne] in _NAME_CHARS:
            ne += 1
        done = ne
        after = _AFTER_NAME.match(view, ne)
        if after is None or not (_KEYWORD.search(view, ns, ne) or _ENV_KEY_NAME.fullmatch(view, ns, ne)):
            continue
        if ns > 0 and view[ns - 1] in "{$%":
            continue  # ${DB_PASSWORD:?required}, {password}: a reference, not an assignment
        name, op = view[ns:ne], after.group("op")
        if op.strip() in ("==", "===", "!=", "!==") and view[after.end() : after.end() + 1] not in ("'", '"', "`"):
            continue  # password == hashed: a comparison with a variable
        if not op.strip() and not (name.startswith("--") or name.lower() in _SPACE_ASSIGNED):
            continue  # a space assignment only for CLI flags (--password x) and a few config files
        kind = _keyword_kind(name)
        if kind is None:
            continue
        line_start, line_end = _line_bounds(view, ns)
        s, e, quoted, rest = _value_span(view, after.end(), line_end, query=ns > 0 and view[ns - 1] in "?&")
        value = view[s:e]
        if not value.strip() or _YAML_BLOCK.match(value.strip()):
            # The value is on the following lines: YAML block scalars, a bare key then an indented value.
            if op.strip() == ":" and _YAML_KEY_LINE.match(view, line_start, line_end):
                _following_lines(view, line_start, line_end, kind, out=out)
            continue
        if _is_value(value, kind, name, view[line_start:line_end], quoted=quoted, op=op, rest=rest):
            out.append(Finding(s, e, kind))
    if "value" in view:
        for m in _KEY_VALUE_ATTR.finditer(view):
            kind = _keyword_kind(m.group("k"))
            if kind and _is_value(m.group("v"), kind, m.group("k"), "", quoted=True, op="=", rest=""):
                out.append(Finding(m.start("v"), m.end("v"), kind))
    if "machine" in view:
        for m in _NETRC.finditer(view):
            out.append(Finding(m.start("v"), m.end("v"), "password"))
    if "</" in view:
        for m in _XML_SECRET.finditer(view):
            kind = _keyword_kind(m.group("tag")) or "secret"
            out.append(Finding(m.start("v"), m.end("v"), kind))


def _following_lines(view: str, line_start: int, line_end: int, kind: str, *, out: list[Finding]) -> None:
    """The indented lines after `key:` / `key: |` (at most 64), or the single next
    line when it is one token: a value continued on the next line."""
    line = view[line_start:line_end]
    indent = len(line) - len(line.lstrip(" \t"))
    pos = line_end + 1
    taken = 0
    while pos < len(view) and taken < 64:
        nl = view.find("\n", pos)
        end = len(view) if nl < 0 else nl
        text = view[pos:end]
        stripped = text.strip()
        if not stripped:
            if taken:
                break
            pos = end + 1
            continue
        lead = len(text) - len(text.lstrip(" \t"))
        if lead <= indent:
            if taken == 0 and " " not in stripped and len(stripped) >= 8 and not stripped.endswith(":") \
                    and re.fullmatch(r"[A-Za-z0-9+/=_.~-]+", stripped):
                out.append(Finding(pos + lead, pos + lead + len(stripped), kind))
            break
        out.append(Finding(pos + lead, pos + lead + len(stripped), kind))
        taken += 1
        pos = end + 1


# Prose: "my password is Hunter2!" -- a value with a digit, a capital or a symbol.
_PROSE_PASSWORD = re.compile(
    r"(?i)\b(?:password|passphrase|passcode|pwd|pin code|wifi key|api key|token)\s+(?:is|was|would be|will be)\s*:?\s+"
    r"[`'\"]?(?P<v>[^\s`'\"]{6,})"
)


_PROSE_KEY = re.compile(
    r"(?i)\b(?:key|secret|token|credential)\s+(?:is|was)\s*:?\s+[`'\"]?(?P<v>[A-Za-z0-9+/=_.-]{16,})"
)


def _prose_passwords(view: str, out: list[Finding]) -> None:
    lowered = view.lower()
    if " is" not in lowered and " was" not in lowered:
        return
    for m in _PROSE_KEY.finditer(view):
        v = m.group("v").rstrip(".")
        if (len(v) >= 32 and _HEXISH.fullmatch(v) and not v.count("-")) or looks_random(v, context=True):
            out.append(Finding(m.start("v"), m.start("v") + len(v), "secret"))
    for m in _PROSE_PASSWORD.finditer(view):
        v = m.group("v").rstrip(".,;:!?)")
        if v.isalpha() and v.islower():
            continue
        if v.lower() in _NOT_VALUES or heuristic.is_templated_secret(v) or v[0] == "<":
            continue
        kind = (
            "password"
            if "pass" in m.group(0).lower() or "pwd" in m.group(0).lower() or "pin" in m.group(0).lower()
            else "api_key"
        )
        if "token" in m.group(0).lower()[: m.start("v") - m.start()]:
            kind = "token"
        out.append(Finding(m.start("v"), m.start("v") + len(v), kind))


_MYSQL_P = re.compile(r"(?<=\s)-p(?P<v>[^\s'\"]{4,}|'[^']+'|\"[^\"]+\")")
_DOCKER_P = re.compile(r"\blogin\b[^\n]*?\s(?:-p|--password)[ =](?P<v>'[^']+'|\"[^\"]+\"|[^\s'\"]+)")
_SSHPASS = re.compile(r"\bsshpass\s+-p\s*(?P<v>'[^']+'|\"[^\"]+\"|\S+)")


def _cli(view: str, out: list[Finding]) -> None:
    if "mysql" in view or "mariadb" in view:
        for m in _MYSQL_P.finditer(view):
            s, e = m.span("v")
            if view[s] in "'\"":
                s, e = s + 1, e - 1
            out.append(Finding(s, e, "password"))
    if "login" in view:
        for m in _DOCKER_P.finditer(view):
            s, e = m.span("v")
            if view[s] in "'\"":
                s, e = s + 1, e - 1
            if not view[s:e].startswith("$"):
                out.append(Finding(s, e, "password"))
    if "sshpass" in view:
        for m in _SSHPASS.finditer(view):
            s, e = m.span("v")
            if view[s] in "'\"":
                s, e = s + 1, e - 1
            out.append(Finding(s, e, "password"))
