"""The secret formats the privacy filter knows, and how each is found cheaply.

A format is a regular expression plus what must be in a text before it is worth running:
`heads`, prefixes a word of the text starts with (`ghp_`, `AKIA`, `sk-ant-`), or `triggers`,
lower-case substrings of the text (`passw`, `curl`, `://`). The filter in `privacy.py` finds
both with C-level string operations and compiles and runs only the formats they select.

The part of a match to hide is the group named `s` (the whole match when there is none);
the rest stays readable, so `password=[REDACTED:password]` still says what was there. A
format may also veto a match (`valid`) or build the replacement itself (`replace`).

Facts about the formats come from the providers' documentation and the public rules of
gitleaks, detect-secrets and trufflehog; the patterns are our own. docs/privacy.md lists
what is redacted and which look-alikes are kept on purpose.
"""

from __future__ import annotations

from nmem.util.lazyregex import LazyRegex

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable

PLACEHOLDER = "[REDACTED:{kind}]"


class Format:
    """One secret format: its pattern, its placeholder kind, and what must be in a text for it to match."""

    __slots__ = ("heads", "kind", "marker", "needs", "regex", "replace", "triggers", "valid")

    def __init__(self, kind: str, source: str, *, heads: tuple[str, ...] = (), marker: tuple[int, str] | None = None,
                 triggers: tuple[str, ...] = (), needs: tuple[str, ...] = (),
                 valid: Callable[[str], bool] | None = None,
                 replace: Callable[[re.Match[str]], str] | None = None) -> None:
        self.kind = kind
        self.regex = LazyRegex(source)
        self.heads = tuple(map(str.encode, heads))     # case-sensitive word prefixes
        # a literal at a fixed offset in the word, for tokens with a random start: (4, "Q~")
        self.marker = None if marker is None else (marker[0], marker[0] + len(marker[1]), marker[1].encode())
        self.triggers = triggers                        # lower-case substrings of the text
        self.needs = needs                              # substrings the text must all hold
        self.valid = valid                              # a check on the secret itself
        self.replace = replace                          # builds the replacement for a match

    def redact(self, text: str) -> str:
        if not all(n in text for n in self.needs):
            return text
        return self.regex.get().sub(self.replace or self._hide, text)

    def _hide(self, match: re.Match[str]) -> str:
        secret = match.group("s") if "s" in match.re.groupindex else match.group(0)
        if secret is None or (self.valid is not None and not self.valid(secret)):
            return match.group(0)
        return hide(match, "s" if "s" in match.re.groupindex else 0, self.kind)


def hide(match: re.Match[str], group: int | str, kind: str) -> str:
    """The match with one group replaced by the placeholder for `kind`."""
    start, end = match.span(group)
    base = match.start()
    whole = match.group(0)
    return whole[:start - base] + PLACEHOLDER.format(kind=kind) + whole[end - base:]


# -- what a value looks like ----------------------------------------------------------------------

_SEPARATORS = LazyRegex(r"[^A-Za-z0-9]+")
_WORDISH = LazyRegex(r"[A-Za-z]+[0-9]{0,3}|[0-9]+|[0-9]{1,3}[A-Za-z]+|v[0-9]+(?:\.[0-9]+)*")
_DOTTED_NAME = LazyRegex(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")
_REFERENCE = LazyRegex(r"""(?x)\$(?:\{\{.*\}\}|\{[^}]*\}|\([^)]*\)|[A-Za-z_]\w*|[0-9@*#?])
                           |%[A-Za-z_]\w*%|%\([A-Za-z_]\w*\)s|\{\{.*\}\}|<[^<>]+>|\{[A-Za-z_][\w.]*\}|\#\{[^}]*\}
                           |@[A-Za-z_][\w.]*@""")
_REFERENCE_PREFIXES = ("$(", "${", "op://", "vault:", "arn:", "env:", "file:", "ENC[", "!vault", "ref+", "secretref:",
                       "keyvault:", "process.env", "os.environ", "secrets.", "${{", "{{")

_PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "passphrase", "passcode", "pw"})
_SECRET_WORDS = frozenset({"secret", "token", "credential", "credentials", "apikey", "authorization", "auth",
                           "salt", "pat", "privatekey", "secretkey", "accesskey"})
_KEY_QUALIFIERS = frozenset({
    "api", "access", "secret", "private", "app", "application", "account", "license", "licence", "master",
    "signing", "sign", "encryption", "encrypt", "enc", "client", "auth", "subscription", "service", "admin",
    "write", "read", "deploy", "ingest", "insert", "sdk", "server", "rest", "session", "shared", "webhook",
    "bot", "user", "personal", "integration", "consumer", "storage", "primary", "secondary", "hmac", "jwt",
    "aes", "root", "cipher", "crypto", "mgmt", "management", "merchant", "developer", "project", "org",
})
# Words that may follow the secret word in a name: SECRET_KEY_BASE, DB_PASSWORD_PROD, API_KEY_V2.
_TRAILING_QUALIFIERS = frozenset({
    "value", "val", "str", "string", "raw", "b64", "base64", "hex", "enc", "encoded", "encrypted", "plain",
    "plaintext", "base", "prod", "production", "dev", "development", "staging", "stage", "stg", "test",
    "testing", "live", "local", "default", "override", "new", "old", "current", "confirm", "confirmation",
    "again", "repeat", "here", "v",
})
_NOT_PASS = frozenset({"bypass", "compass", "encompass", "overpass", "surpass", "trespass", "underpass",
                       "multipass", "onepass", "firstpass"})
_QUERY_WORDS = frozenset({"key", "sig", "signature"})  # secret only as URL parameters: ?key=…&sig=…
# Values that say what a field is rather than hold one: types, literals, prose.
_NOT_VALUES = frozenset({
    "none", "null", "nil", "undefined", "true", "false", "yes", "no", "on", "off", "string", "str", "int",
    "integer", "bool", "boolean", "number", "float", "any", "object", "bytes", "text", "char", "optional",
    "required", "empty", "missing", "invalid", "unknown", "default", "redacted", "hidden", "masked", "secret",
    "secrets", "password", "token", "key", "apikey", "env", "environment", "stdin", "prompt", "inherit",
    "the", "a", "an", "is", "are", "was", "were", "be", "to", "of", "in", "for", "with", "and", "or", "not",
    "it", "this", "that", "if", "when", "then", "must", "should", "can", "will", "may", "has", "have", "set",
    "unset", "used", "needed", "expired", "revoked", "rotated", "valid", "provided", "via", "from", "see",
    "same", "changeme", "example", "placeholder", "dummy", "pass", "passwd", "pwd", "pw", "user", "username",
})
_PROSE_WORDS = frozenset({"the", "is", "are", "must", "be", "not", "this", "field", "required", "invalid",
                          "please", "enter", "should", "cannot", "can't", "to", "of", "least", "characters",
                          "incorrect", "wrong", "match", "your"})


def name_words(name: str) -> list[str]:
    """`X-Api-Key` → [x, api, key]; `apiKeySource` → [api, key, source]; `PGPASSWORD` → [pgpassword].

    Without `re`: names are judged before any pattern needs compiling, so a text whose only
    trigger is a word like `passed` or `Author` never loads the regex module.
    """
    words: list[str] = []
    word = ""
    for ch in name:
        if not ch.isalnum():
            if word:
                words.append(word)
            word = ""
            continue
        if word:
            last = word[-1]
            if ch.isdigit() != last.isdigit() or (ch.isupper() and last.islower()):
                words.append(word)
                word = ""
            elif ch.islower() and last.isupper() and len(word) > 1 and word[-2].isupper():
                words.append(word[:-1])  # `XMLHttp`: the last capital starts the next word
                word = last
        word += ch
    if word:
        words.append(word)
    return [w.lower() for w in words]


def _is_password_word(word: str, words: int) -> bool:
    if word in _PASSWORD_WORDS:
        return True
    if word == "pass":
        return words > 1
    if len(word) > 4 and word.endswith(("password", "passwd", "pwd", "passphrase")):
        return True
    return len(word) > 5 and word.endswith("pass") and word not in _NOT_PASS


def _is_secret_word(word: str, previous: str) -> bool:
    if word in _SECRET_WORDS:
        return True
    if word == "key":
        return previous in _KEY_QUALIFIERS
    if len(word) > 6 and word.endswith(("token", "secret", "apikey")):
        return True
    return len(word) > 3 and word.endswith("key") and word[:-3] in _KEY_QUALIFIERS


def name_strength(name: str, in_query: bool = False) -> str | None:
    """'password' when the name holds a password, 'secret' when a token or key, else None.

    The secret word must end the name (qualifiers like `_PROD` or `_V2` aside): `token` and
    `client_secret` name secrets, `token_type`, `apiKeySource` and `password_field` do not.
    """
    words = name_words(name)
    while words and (words[-1].isdigit() or words[-1] in _TRAILING_QUALIFIERS):
        words.pop()
    if not words:
        return None
    last = words[-1]
    previous = words[-2] if len(words) > 1 else ""
    if _is_password_word(last, len(words) + name.startswith("-")):
        return "password"
    if last in ("pat", "salt") and len(words) == 1 and not name.startswith("-"):
        return None  # `pat = re.compile(…)`, a lone `salt`: too common as plain names
    if _is_secret_word(last, previous):
        return "secret"
    if in_query and last in _QUERY_WORDS:
        return "secret"
    return None


def is_reference(value: str) -> bool:
    """A variable, template or secret-manager reference standing in for the value."""
    if value.startswith(_REFERENCE_PREFIXES):
        return True
    return _REFERENCE.get().fullmatch(value.strip("\"'")) is not None


def is_placeholder(value: str) -> bool:
    """`********`, `xxxx`, `sk-...`, `[REDACTED:…]`, `PASSWORD`, `YOUR_TOKEN`: nothing secret to hide."""
    if value.startswith("[REDACTED:") or value.endswith(("...", "…")):
        return True
    if value.isupper() and value.replace("_", "").replace("-", "").isalpha():
        return True  # a name in capitals stands for the value, as in usage text: `-p PASSWORD`
    return len(set(value.lower()) - set("*x.•-_ ")) == 0


def is_path(value: str) -> bool:
    if value.startswith(("/", "~/", "./", "../")) or value[1:3] in (":\\", ":/"):
        return True
    tail = value.rsplit("/", 1)[-1]
    return "/" in value and "." in tail and 1 <= len(tail.rsplit(".", 1)[1]) <= 5 and tail.rsplit(".", 1)[1].isalpha()


def is_wordish(value: str) -> bool:
    """Made of words and numbers (`oauth2_token`, `v1.2.3`, `2024-01-15`), not of random characters."""
    wordish = _WORDISH.get()
    return all(wordish.fullmatch(part) for part in _SEPARATORS.get().split(value) if part)


def _names_a_secret(value: str) -> bool:
    """An identifier naming a secret rather than holding one: `user_password`, `accessToken`."""
    if not (value[:1].isalpha() or value[:1] in "_$") or not all(c.isalnum() or c in "_$" for c in value):
        return False
    words = name_words(value)
    return is_wordish(value) and any(
        _is_password_word(w, len(words)) or _is_secret_word(w, p) or w in ("key", "keys", "tokens", "secrets")
        for w, p in zip(words, ["", *words], strict=False))


def _is_code_reference(value: str) -> bool:
    """`this.options.authToken`, `form.password`, `settings.SECRET_KEY`: an expression, not a value."""
    return _DOTTED_NAME.get().fullmatch(value) is not None and is_wordish(value.replace("$", ""))


def looks_random(value: str) -> bool:
    """Letters without digits that still read as a key: mixed case in about equal parts, or symbols."""
    letters = [c for c in value if c.isalpha()]
    if len(value) < 16 or not letters:
        return False
    upper = sum(c.isupper() for c in letters) / len(letters)
    return 0.25 <= upper <= 0.75 or any(c in "+=~!@#%^*" for c in value)


def is_token(value: str, min_len: int = 6) -> bool:
    """A value with the shape of a generated key: letters and digits mixed, not words and numbers."""
    if len(value) < min_len or not all(c.isalnum() or c in "+/=_.~:@!#%^*-" for c in value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    if has_digit and has_alpha and not is_wordish(value):
        return True
    return not has_digit and looks_random(value)


def _is_prose(value: str) -> bool:
    words = value.lower().split()
    return value.rstrip().endswith((".", "!", "?")) or any(w.strip(",.:;") in _PROSE_WORDS for w in words)


def secret_value(value: str, strength: str, *, separator: str, quoted: bool, shouty: bool, after: str) -> bool:
    """Whether `value`, given for a name of `strength`, is a secret to hide.

    separator: `assign` (`:` `=` `=>` or a quoted pair), `flag` (`--password VALUE`) or
    `space` (`apikey 550e…`: taken only when the value is unmistakably a key). `shouty` names
    (`DB_PASSWORD`, flags) are configuration, so their values are taken literally; in code a
    value naming a secret (`password=user_password`) is a variable, not a password.
    """
    if len(value) < 3 or (separator == "flag" and value.startswith("-")):
        return False
    # first the shape a value of this kind must have (cheap, and most candidates fail it) ...
    if strength == "password":
        if separator == "space" or (any(c.isspace() for c in value) and _is_prose(value)):
            return False
    elif separator == "space":
        if "://" in value or not is_token(value, 16):
            return False
    elif any(c.isspace() for c in value) or "://" in value or not (
            is_token(value) or (quoted and len(value) >= 8 and looks_random(value))):
        return False
    # ... then what it may stand for instead of a secret
    if is_placeholder(value) or is_reference(value) or value.lower() in _NOT_VALUES:
        return False
    if not quoted and ((after and after in "([") or _is_code_reference(value) or is_path(value)):
        return False
    return shouty or not _names_a_secret(value)


# -- names and values: KEY=value, "key": "value", --flag value, X-Api-Key: value -----------------

# A name holding a secret word, then `=`, `:`, `=>`, a comma between quoted strings, or blanks.
# The scan finds the secret words with `str.find` and widens each hit to the name around it.
_AFTER_NAME = r"""(?x)
    (?P<close>\\?["'])?
    (?: [ \t]*(?P<assign>=>|:=|=|:(?!:))[ \t]*
      | (?<=["'])[ \t]*(?P<comma>,)[ \t]*
      | (?P<space>[ \t]+) )
    (?: (?P<open>\\?["'`])(?P<quoted>[^\n]*?)(?P=open)
      | (?P<bare>[^\s"'`,;&|<>(){}\[\]]+) )
"""
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.$-")
_NAME_TAIL_CHARS = _NAME_CHARS - {"$"}
_strengths: dict[tuple[str, bool], str | None] = {}


def cached_strength(name: str, in_query: bool) -> str | None:
    """name_strength, remembered: a text repeats its names (`passed` on every line of a test run)."""
    key = (name, in_query)
    if key not in _strengths:
        if len(_strengths) >= 4096:
            _strengths.clear()
        _strengths[key] = name_strength(name, in_query)
    return _strengths[key]


class LabelFormat(Format):
    """`KEY=value`, `"key": "value"`, `--flag value`, `X-Api-Key: value`: the name says what the value is.

    Its triggers are the secret words it looks for; its pattern matches what follows a name.
    """

    __slots__ = ()

    def _hits(self, text: str) -> list[int]:
        lowered = text.lower()
        hits: list[int] = []
        for word in self.triggers:
            at = lowered.find(word)
            while at >= 0:
                hits.append(at)
                at = lowered.find(word, at + len(word))
        return sorted(hits)

    def redact(self, text: str) -> str:
        pieces: list[str] = []
        copied = 0     # text[:copied] is in pieces
        scanned = 0    # hits before this are inside a name or value already handled
        for at in self._hits(text):
            if at < scanned:
                continue
            start = at
            while start > 0 and text[start - 1] in _NAME_CHARS:
                start -= 1
            end = at
            while end < len(text) and text[end] in _NAME_TAIL_CHARS:
                end += 1
            scanned = end
            name = text[start:end]
            strength = cached_strength(name, start > 0 and text[start - 1] in "?&")
            if strength is None:
                continue
            match = self.regex.get().match(text, end)
            replaced = None if match is None else _label(text, name, strength, match)
            if match is not None and replaced is not None:
                pieces += [text[copied:end], replaced]
                copied = scanned = match.end()
        return "".join(pieces) + text[copied:] if pieces else text


def _label(text: str, name: str, strength: str, match: re.Match[str]) -> str | None:
    """The replacement for the separator and value after `name` (matched by _AFTER_NAME), or None."""
    if match.group("comma") and not (match.group("close") and match.group("open")):
        return None  # ("NAME", "value") only between quotes
    if match.group("space") and match.group("close"):
        return None  # `"$API_KEY" https://…`: a quote closed; what follows is another word
    quoted = match.group("open") is not None
    group = "quoted" if quoted else "bare"
    value = match.group(group)
    flag = name.startswith("-")
    separator = "assign" if match.group("assign") or match.group("comma") else ("flag" if flag else "space")
    shouty = flag or name.upper() == name
    if not secret_value(value, strength, separator=separator, quoted=quoted, shouty=shouty,
                        after=text[match.end():match.end() + 1]):
        first = value.split("/", 1)[0]
        if quoted or first == value or not first or not secret_value(
                first, strength, separator=separator, quoted=False, shouty=shouty, after="/"):
            return None
        # a value that goes on as a path (`KEY=secret/more`, a path named after a secret): its first part
        start = match.start(group) - match.start()
        whole = match.group(0)
        return whole[:start] + PLACEHOLDER.format(kind=strength) + whole[start + len(first):]
    return hide(match, group, strength)


def _xml_element(match: re.Match[str]) -> str:
    if name_strength(match.group("tag")) is None or is_reference(match.group("s")) or is_placeholder(match.group("s")):
        return match.group(0)
    return hide(match, "s", "secret")


def _app_setting(match: re.Match[str]) -> str:
    strength = name_strength(match.group("name"))
    if strength is None or not secret_value(match.group("s"), strength, separator="assign", quoted=True,
                                            shouty=True, after=""):
        return match.group(0)
    return hide(match, "s", strength)


# -- command lines ---------------------------------------------------------------------------------

_ARG = r"""(?P<s>"[^"\n]*"|'[^'\n]*'|[^\s"'`;&|]+)"""
_SAME_COMMAND = r"(?:[^\n;&|]|\\\n)*?"   # the rest of one command, across `\` line continuations


def _cli_password(value: str) -> bool:
    """A password given on a command line or in a URL, unless it is a flag, a port, a variable or a placeholder."""
    bare = value.strip("\"'")
    return len(bare) >= 3 and not bare.startswith("-") and not (bare.isdigit() and len(bare) <= 5) \
        and bare.lower() not in _NOT_VALUES and not is_reference(value) and not is_placeholder(bare)


def _htpasswd(match: re.Match[str]) -> str:
    """`htpasswd -b[c] FILE USER PASSWORD`, `htpasswd -nb USER PASSWORD`: with -b the password is the last word."""
    if "b" not in match.group("flags").replace("-", "") or not _cli_password(match.group("s")):
        return match.group(0)
    return hide(match, "s", "password")


def _cookie(match: re.Match[str]) -> str:
    """Cookie values long enough to be session tokens; names and attributes stay."""
    pairs = _COOKIE_PAIR.get()
    base = match.start("s")

    def value(pair: re.Match[str]) -> str:
        v = pair.group(2)
        if len(v) >= 16 and is_token(v.strip('"'), 16) and not is_reference(v):
            return pair.group(1) + "=" + PLACEHOLDER.format(kind="cookie")
        return pair.group(0)

    cookies = pairs.sub(value, match.group("s"))
    whole = match.group(0)
    return whole[:base - match.start()] + cookies


_COOKIE_PAIR = LazyRegex(r"([^=;\s]+)=([^;\s]*)")


def _authorization(value: str) -> bool:
    return len(value) >= 8 and not is_reference(value) and not is_placeholder(value) and "{" not in value


def _mixed_key(value: str) -> bool:
    """OpenAI-style keys mix upper case, lower case and digits; `sk-learn-tutorial` does not."""
    body = value.split("-", 1)[-1]
    return any(c.isupper() for c in body) and any(c.islower() for c in body) and any(c.isdigit() for c in body)


def _userinfo_token(value: str) -> bool:
    return is_token(value, 20)


def _twilio_auth_token(match: re.Match[str]) -> str:
    """32 hex digits are a digest anywhere else; beside a Twilio account SID they are its auth token."""
    if _TWILIO_SID.get().search(match.string) is None:
        return match.group(0)
    return hide(match, 0, "twilio-auth-token")


_TWILIO_SID = LazyRegex(r"\bAC[0-9a-f]{32}\b")


# -- passwords in prose: "the db password is X", "pw X", "creds admin / X", "login with X" ---------

_PROSE_PASSWORD = r"""(?ix)\b(?P<label>password|passwd|passphrase|pwd?|creds|credentials|log(?:ged)?[ ]?in|sign[ ]?in)\b
    (?:[ \t]+(?:for|of|on|to)(?:[ \t]+(?!is\b|was\b)[\w.@:/-]+){1,3})?
    (?:[ \t]+(?P<link>is[ \t]+now|is[ \t]+still|is|was|are|now|will[ \t]+be|should[ \t]+be|set[ \t]+to|changed[ \t]+to
                      |reset[ \t]+to|with|using|as)\b[ \t]*:?[ \t]*
      |[ \t]*(?P<sep>[:=])[ \t]*
      |[ \t]+)
    ["'`]?(?:(?P<user>[\w.@+-]+)[ \t]*/[ \t]*)?
    (?P<s>[^\s"'`,;&|?()<>\[\]{}]*[^\s"'`,;&|()<>\[\]{}.!?:])"""
# Words that follow "the password is" in prose about passwords rather than before one.
_PROSE_STOP = frozenset({
    "required", "wrong", "incorrect", "correct", "invalid", "expired", "changed", "reset", "stored", "hashed",
    "encrypted", "missing", "empty", "too", "very", "also", "still", "now", "same", "different", "weak", "strong",
    "secure", "insecure", "long", "short", "case", "saved", "sent", "updated", "generated", "needed", "optional",
    "mandatory", "never", "always", "only", "just", "then", "there", "here", "what", "which", "where", "who",
    "how", "why", "fine", "ok", "okay", "good", "bad", "visible", "shown", "plain", "ignored", "prompted",
    "field", "fields", "input", "manager", "policy", "rules", "length", "hash", "salt", "protected", "reuse",
    "rotation", "change", "recovery", "form", "page", "screen", "dialog", "button", "link", "email", "sso",
    "oauth", "github", "google", "microsoft", "apple", "saml", "ldap", "your", "their", "his", "her", "its",
    "our", "my", "these", "those", "from", "on", "at", "by", "but", "so", "using", "users", "admin", "root",
    "please", "enter", "typed", "given", "known", "unknown", "blank", "cleared", "accepted", "rejected",
    "authentication", "auth", "flow", "prompt", "vault", "keychain", "keyring", "stdin",
    "file", "env", "variable", "parameter", "argument", "option", "flag", "setting", "config", "configuration",
})
_WORD_ENDINGS = ("ed", "ing", "ly", "able", "ible", "less", "ful", "tion", "ment", "ness", "ity")


def _password_shaped(value: str) -> bool:
    """Letters with digits or symbols, long enough, and not an e-mail address or a dotted name."""
    if len(value) < 6 or not any(c.isalpha() for c in value):
        return False
    if "@" in value and "." in value.rsplit("@", 1)[1]:
        return False
    return any(c.isdigit() for c in value) or any(not c.isalnum() and c not in "._-" for c in value)


def _prose_password(match: re.Match[str]) -> str:
    label = match.group("label").lower().replace(" ", "")
    value = match.group("s")
    linked = match.group("link") is not None or match.group("sep") is not None
    if match.group("sep") and not match.group("user"):
        return match.group(0)  # `password = value` is the labelled formats' (code, configuration)
    lowered = value.lower()
    called = match.string[match.end():match.end() + 1] in ("(", "[")  # `password is check(x)`: code
    if (called or len(value) < 4 or lowered in _NOT_VALUES or lowered in _PROSE_WORDS or lowered in _PROSE_STOP
            or is_reference(value) or is_placeholder(value) or is_path(value) or "://" in value
            or (value.isalpha() and value.islower() and lowered.endswith(_WORD_ENDINGS))):
        return match.group(0)
    if match.group("user"):
        secret = True
    elif label in ("creds", "credentials"):
        secret = linked and _password_shaped(value)
    elif label in ("login", "loggedin", "signin"):
        secret = match.group("link") in ("with", "using", "as") and _password_shaped(value)
    elif label == "pw":
        secret = True
    else:
        secret = (linked and match.group("link") not in ("with", "using", "as")) or _password_shaped(value)
    return hide(match, "s", "password") if secret else match.group(0)


# -- the table ------------------------------------------------------------------------------------
# Order matters: formats with a fixed shape first, then command lines and headers, then names
# with values. A later format sees the placeholders the earlier ones left.

_B62 = "A-Za-z0-9"
_URLSAFE = r"A-Za-z0-9_\-"
_AWS_ID_HEADS = ("A3T", "AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA")
_COMMAND_TRIGGERS = ("mysql", "mariadb", "login", "curl", "http", "redis-cli", "zip", "7z", "sshpass", "htpasswd")

FORMATS: tuple[Format, ...] = (
    # private keys and password hashes
    Format("private-key", r"(?s)-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----.*?"
           r"(?:-----END ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----|\Z)", triggers=("key",)),
    Format("private-key", r"(?s)(?<=Private-Lines:)[ \t]*\d+\s*\n(?P<s>(?:[A-Za-z0-9+/=]+(?:\r?\n|\Z))+)",
           triggers=("key",)),  # PuTTY key files
    Format("private-key", r"(?<=Private-MAC:)[ \t]*(?P<s>[0-9a-f]{40,64})", triggers=("key",)),
    Format("age-key", r"\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}\b", heads=("AGE-SECRET-KEY-1",)),
    Format("password-hash", r"\$(?:2[abxy]\$\d\d\$[./A-Za-z0-9]{53}|apr1\$[./A-Za-z0-9]{1,8}\$[./A-Za-z0-9]{22}"
           r"|[156]\$(?:rounds=\d+\$)?[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{22,86}"
           r"|y\$[./A-Za-z0-9]+\$[./A-Za-z0-9]{1,86}\$[./A-Za-z0-9]{43}"
           r"|argon2(?:id|i|d)\$v=\d+\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]{11,}\$[A-Za-z0-9+/]{16,})",
           triggers=("$",)),
    # cloud providers
    Format("aws-access-key", r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",
           heads=_AWS_ID_HEADS),
    Format("aws-secret-key", r"(?i)aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?(?P<s>[A-Za-z0-9/+=]{40})"
           r"(?![A-Za-z0-9+=])", triggers=("secret",)),
    Format("azure-client-secret", r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}"
           r"(?![A-Za-z0-9_~.-])", marker=(4, "Q~")),
    Format("google-api-key", rf"\bAIza[{_URLSAFE}]{{35}}(?![{_URLSAFE}])", heads=("AIza",)),
    Format("google-oauth-secret", rf"\bGOCSPX-[{_URLSAFE}]{{28}}", heads=("GOCSPX-",)),
    Format("google-oauth-token", rf"\bya29\.[{_URLSAFE}]{{30,}}", heads=("ya29.",)),
    Format("digitalocean-token", r"\bdo[opr]_v1_[a-f0-9]{64}\b", heads=("dop_v1_", "doo_v1_", "dor_v1_")),
    Format("heroku-key", rf"\bHRKU-[{_URLSAFE}]{{50,70}}", heads=("HRKU-",)),
    Format("databricks-token", r"\bdapi[a-f0-9]{32}(?:-\d)?\b", heads=("dapi",)),
    Format("supabase-key", rf"\b(?:sbp_[a-f0-9]{{40}}|sb_secret_[{_URLSAFE}]{{20,}})", heads=("sbp_", "sb_secret_")),
    Format("planetscale-token", rf"\bpscale_(?:tkn|pw|oauth)_[{_URLSAFE}.]{{32,64}}", heads=("pscale_",)),
    Format("netlify-token", rf"\bnfp_[{_B62}]{{36,}}", heads=("nfp_",)),
    Format("fly-token", rf"\bfm[12][ar]?_[{_B62}+/=_-]{{60,}}", heads=("fm1", "fm2")),
    Format("terraform-token", rf"\b[{_B62}]{{14}}\.atlasv1\.[{_URLSAFE}=]{{60,70}}", marker=(14, ".atlasv1.")),
    Format("pulumi-token", r"\bpul-[a-f0-9]{40}\b", heads=("pul-",)),
    Format("vault-token", rf"\bhv[sbr]\.[{_URLSAFE}]{{24,}}", heads=("hvs.", "hvb.", "hvr.")),
    Format("doppler-token", rf"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[{_B62}]{{40,44}}\b", heads=("dp.",)),
    Format("onepassword-token", rf"\bops_eyJ[{_B62}+/=_-]{{100,}}", heads=("ops_eyJ",)),
    Format("tailscale-key", rf"\btskey-[a-z]+-[{_B62}-]{{20,}}", heads=("tskey-",)),
    # code hosting, packages, CI
    Format("github-token", rf"\bgithub_pat_[{_B62}_]{{22,255}}", heads=("github_pat_",)),
    Format("github-token", rf"\bgh[pousr]_[{_B62}]{{30,255}}\b", heads=("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    Format("gitlab-token", rf"\bgl(?:pat|dt|rt|ptt|cbt|imt|agent|oas|ft|soat)-[{_URLSAFE}]{{20,}}",
           heads=("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glimt-", "glagent-", "gloas-", "glft-",
                  "glsoat-")),
    Format("gitlab-token", rf"\bGR1348941[{_URLSAFE}]{{20,}}", heads=("GR1348941",)),
    Format("atlassian-token", rf"\bATATT3[{_URLSAFE}=]{{100,}}", heads=("ATATT3",)),
    Format("bitbucket-token", rf"\bATBB[{_B62}_=.-]{{28,}}", heads=("ATBB",)),
    Format("npm-token", rf"\bnpm_[{_B62}]{{36}}\b", heads=("npm_",)),
    Format("pypi-token", rf"\bpypi-AgE[{_URLSAFE}]{{50,}}", heads=("pypi-AgE",)),
    Format("docker-hub-token", rf"\bdckr_(?:pat|oat)_[{_URLSAFE}]{{27,}}", heads=("dckr_",)),
    Format("postman-key", r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b", heads=("PMAK-",)),
    Format("linear-key", rf"\blin_(?:api|oauth)_[{_B62}]{{40}}\b", heads=("lin_",)),
    Format("notion-token", rf"\b(?:ntn_[{_B62}]{{40,}}|secret_[{_B62}]{{43}}\b)", heads=("ntn_", "secret_")),
    # AI providers
    Format("anthropic-key", rf"\bsk-ant-[{_B62}]+-[{_URLSAFE}]{{20,}}", heads=("sk-ant-",)),
    Format("openai-key", rf"\bsk-(?:proj-|svcacct-|admin-|None-|or-v1-)?[{_URLSAFE}]{{20,}}", heads=("sk-",),
           valid=_mixed_key),
    Format("huggingface-token", rf"\b(?:hf_|api_org_)[{_B62}]{{30,}}\b", heads=("hf_", "api_org_")),
    Format("groq-key", rf"\bgsk_[{_B62}]{{40,}}", heads=("gsk_",)),
    Format("xai-key", rf"\bxai-[{_B62}]{{60,}}", heads=("xai-",)),
    Format("replicate-token", rf"\br8_[{_B62}]{{37}}\b", heads=("r8_",)),
    Format("perplexity-key", rf"\bpplx-[{_B62}]{{40,}}", heads=("pplx-",)),
    # messaging, payments, monitoring
    Format("slack-token", rf"\bxox[abposre](?:\.xox[abposr])?-[{_B62}-]{{15,}}", heads=("xox",)),
    Format("slack-token", rf"\bxapp-\d-[{_B62}-]{{20,}}", heads=("xapp-",)),
    Format("slack-webhook", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9/_\-]+)",
           triggers=("hooks",)),
    Format("discord-webhook", r"https://(?:[a-z]+\.)?discord(?:app)?\.com/api/webhooks/\d+/(?P<s>[A-Za-z0-9_-]{60,80})",
           triggers=("hooks",)),
    # the first part is the bot's numeric id in base64: "1…" is "MT…", "2…" "Mj…", … "9…" "OT…"
    Format("discord-bot-token", rf"\b[MNO][{_URLSAFE}]{{23,27}}\.[{_URLSAFE}]{{6}}\.[{_URLSAFE}]{{27,38}}\b",
           heads=("MT", "Mj", "Mz", "ND", "NT", "Nj", "Nz", "OD", "OT")),
    Format("telegram-bot-token", rf"\b\d{{8,10}}:AA[{_URLSAFE}]{{33}}(?![{_URLSAFE}])", heads=("AA",)),
    Format("twilio-auth-token", r"(?<![\w-])[0-9a-f]{32}(?![\w-])", heads=("AC",),
           replace=_twilio_auth_token),
    Format("twilio-key", r"\b(?:SK|AC)[0-9a-fA-F]{32}\b", heads=("SK", "AC")),
    Format("sendgrid-key", rf"\bSG\.[{_URLSAFE}]{{22}}\.[{_URLSAFE}]{{43}}\b", heads=("SG.",)),
    Format("mailgun-key", rf"\b(?:key|pubkey)-[{_B62}]{{32}}\b", heads=("key-", "pubkey-")),
    Format("stripe-key", rf"\b(?:sk|rk)_(?:live|test)_[{_B62}]{{16,}}",
           heads=("sk_live_", "sk_test_", "rk_live_", "rk_test_")),
    Format("stripe-webhook-secret", rf"\bwhsec_[{_B62}]{{24,}}", heads=("whsec_",)),
    Format("shopify-token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b", heads=("shpat_", "shpca_", "shppa_", "shpss_")),
    Format("square-token", rf"\bsq0(?:atp|csp|idp)-[{_URLSAFE}]{{22,60}}", heads=("sq0",)),
    Format("square-token", rf"\bEAAA[{_URLSAFE}+=]{{60}}", heads=("EAAA",)),
    Format("facebook-token", rf"\bEAA[BCDG][{_B62}]{{80,}}", heads=("EAAB", "EAAC", "EAAD", "EAAG")),
    Format("mapbox-token", rf"\bsk\.eyJ[{_URLSAFE}]{{20,}}\.[{_URLSAFE}]{{20,}}", heads=("sk.eyJ",)),
    Format("newrelic-key", rf"\bNR(?:AK|JS|II|AA)-[{_B62}-]{{19,40}}", heads=("NRAK-", "NRJS-", "NRII-", "NRAA-")),
    Format("grafana-token", rf"\bglc_[{_B62}+/]{{32,}}={{0,2}}", heads=("glc_",)),
    Format("grafana-token", r"\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}\b", heads=("glsa_",)),
    Format("sentry-token", rf"\bsntry[su]_[{_B62}+/=_]{{40,}}", heads=("sntrys_", "sntryu_")),
    Format("jwt", rf"\beyJ[{_URLSAFE}]{{8,}}\.eyJ[{_URLSAFE}]{{8,}}\.[{_URLSAFE}]{{8,}}", heads=("eyJ",)),
    # URLs: user:password@host in any scheme (the password may hold an unescaped `@`), and a
    # token as the whole user part (https://ghp_…@github.com, a Sentry DSN's key)
    Format("password", r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@\[]*:(?P<s>[^\s/]+)@(?=[^@\s/?#]+(?:[:/?#\s\"'<>]|$))",
           triggers=("://",), needs=("@",), valid=_cli_password),
    Format("url-token", r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://(?P<s>[A-Za-z0-9_\-.~%]{20,})@", triggers=("://",),
           needs=("@",), valid=_userinfo_token),
    # command lines
    Format("password", rf"(?<![\w-])(?:mysql\w*|mariadb[\w-]*)\b{_SAME_COMMAND}[ \t]-p{_ARG}",
           triggers=("mysql", "mariadb"), valid=_cli_password),
    Format("password", rf"\blogin\b{_SAME_COMMAND}[ \t]-p[ \t]+{_ARG}", triggers=("login",), valid=_cli_password),
    Format("password", rf"\bsshpass\b{_SAME_COMMAND}[ \t]-p[ \t]*{_ARG}", triggers=("sshpass",), valid=_cli_password),
    Format("password", rf"\bredis-cli\b{_SAME_COMMAND}[ \t]-a[ \t]+{_ARG}", triggers=("redis-cli",),
           valid=_cli_password),
    Format("password", rf"\b(?:zip|unzip|zipcloak)\b{_SAME_COMMAND}[ \t]-P[ \t]+{_ARG}", triggers=("zip",),
           valid=_cli_password),
    Format("password", rf"\b7z[ar]?\b{_SAME_COMMAND}[ \t]-p(?P<s>[^\s\"'`;&|]+)", triggers=("7z",),
           valid=_cli_password),
    Format("password", r"-pass(?:in|out)?[ \t]+pass:(?P<s>[^\s\"'`;&|]+)", triggers=("pass",), needs=("pass:",),
           valid=_cli_password),
    Format("password", rf"\bcurl\b{_SAME_COMMAND}[ \t](?:-u|--user|-U|--proxy-user)(?:=|[ \t]*)[\"']?[^\s\"':]*:"
           r"(?P<s>[^\s\"'`]+)", triggers=("curl",), valid=_cli_password),
    Format("password", rf"\bhttps?(?=[ \t]){_SAME_COMMAND}[ \t](?:-a|--auth)(?:=|[ \t]+)[\"']?[^\s\"':]*:"
           r"(?P<s>[^\s\"'`]+)", triggers=("http",), valid=_cli_password),  # HTTPie
    Format("password", r"\bhtpasswd(?P<flags>(?:[ \t]+-[A-Za-z]+)+)(?:[ \t]+[^\s;&|`]+)+?[ \t]+(?P<s>[^\s;&|`]+)"
           r"(?=[ \t]*(?:$|[\n;&|]))", triggers=("htpasswd",), replace=_htpasswd),
    # .netrc, on one line or several
    Format("password", r"\blogin[ \t]+\S+[ \t]+password[ \t]+(?P<s>[^\s\"'`]+)", triggers=("pass",),
           needs=("login", "password"), valid=_cli_password),
    Format("password", r"(?m)^[ \t]*password[ \t]+(?P<s>[^\s\"'`]+)[ \t]*$", triggers=("pass",), needs=("machine",),
           valid=_cli_password),
    # HTTP headers: the credential after the scheme; all the parameters of a signed (AWS4, Digest) one
    Format("auth-header", r"(?i)\b(?:proxy-)?authorization\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?"
           r"(?:aws4-hmac-sha256|digest|hmac|signature)[ \t]+(?P<s>[^\n\"'\\`]+)", triggers=("authorization",),
           valid=_authorization),
    Format("auth-header", r"(?i)\b(?:proxy-)?authorization\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?"
           r"(?:(?:bearer|basic|token|bot|apikey|api-key|api-token|key|sso-key|ssws|geniekey|deepl-auth-key"
           r"|negotiate|ntlm|otoken)[ \t]+)?(?P<s>[^\s\"'\\`]+)", triggers=("authorization",), valid=_authorization),
    Format("bearer-token", r"(?i)\bbearer[ \t]+(?P<s>[A-Za-z0-9._~+/\-]{20,}=*)", triggers=("bearer",)),
    Format("cookie", r"(?i)\b(?:set-)?cookie\\?[\"']?[ \t]*:[ \t]*(?P<s>[^\n\"']+)", triggers=("cookie",),
           replace=_cookie),
    # names with values: <password>…</password>, <add key="DbPassword" value="…"/>, KEY=value
    Format("secret", r"""(?i)<(?P<tag>[A-Za-z_][\w.-]*)>(?P<s>[^<>\n]{3,})</(?P=tag)>""",
           triggers=("pass", "pw", "secret", "token", "key"), needs=("</",), replace=_xml_element),
    Format("secret", r"""(?i)\bkey=["'](?P<name>[^"'\n]+)["'][ \t]+value=["'](?P<s>[^"'\n]*)["']""",
           triggers=("key",), replace=_app_setting),
    # prose: the trigger words with the blank after them, so that `passed` or `pwd;` never load `re`
    Format("password", _PROSE_PASSWORD, triggers=("password ", "passwd ", "passphrase ", "pw ", "pwd ", "creds",
                                                  "credentials ", "log in ", "login with", "logged in", "sign in ",
                                                  "signin "), replace=_prose_password),
    LabelFormat("secret", _AFTER_NAME,
                triggers=("pass", "pw", "secret", "token", "key", "auth", "salt", "_pat", "-pat", "sig")),
)

# A trigger listed here is tested only when its parent, a substring of every text it can match
# in, is there: each command-line format needs a ` -` flag, webhooks are URLs.
TRIGGER_PARENTS = {
    "_pat": "pat", "-pat": "pat", "hooks": "://", "authorization": "auth",
    **dict.fromkeys(_COMMAND_TRIGGERS, " -"),
}
