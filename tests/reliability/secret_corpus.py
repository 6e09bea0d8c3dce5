"""Two corpora for the privacy filter: secrets that must be redacted, look-alikes that must survive.

Every secret is FAKE, generated here from a fixed seed in the real shape of its format (prefix,
alphabet, length), and placed in the contexts an agent meets: a command line, an `export`, a
.env file, JSON, YAML, an HTTP header, a URL, a tool's output, a sentence. A case names the
values that must disappear; any 12-character piece of one left in the output is a leak.

The look-alikes are what a coding session is full of and must come through unchanged: git
SHAs, UUIDs used as ids, lockfile digests, data URIs, code that reads a secret from elsewhere,
`--password-stdin`, port maps, versions, paths and prose about tokens.
"""

from __future__ import annotations

import base64
import functools
import json
import random
import string
from dataclasses import dataclass

WINDOW = 12  # any run of this many characters of a secret counts as a leak

_rng = random.Random(20261112)
B62 = string.ascii_letters + string.digits
URLSAFE = B62 + "_-"
HEX = "0123456789abcdef"
B64 = B62 + "+/"
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


def gen(alphabet: str, n: int) -> str:
    """n random characters, with at least one upper-case letter, lower-case letter and digit when
    the alphabet has them (real keys of these lengths always do)."""
    while True:
        value = "".join(_rng.choice(alphabet) for _ in range(n))
        wanted = [set(alphabet) & set(c) for c in (string.ascii_uppercase, string.ascii_lowercase, string.digits)]
        if all(not w or set(value) & w for w in wanted):
            return value


def b64_with_slash(n: int) -> str:
    """Base64 of length n holding `/` and `+` away from the ends, like half of all AWS secret keys."""
    value = list(gen(B62, n))
    value[n // 3] = "/"
    value[2 * n // 3] = "+"
    return "".join(value)


@dataclass(frozen=True)
class Case:
    fmt: str          # the secret format
    context: str      # where it appears
    text: str
    values: tuple[str, ...]   # what must disappear

    @property
    def id(self) -> str:
        return f"{self.fmt}/{self.context}"

    def pieces(self) -> set[str]:
        out: set[str] = set()
        for value in self.values:
            v = value.replace("\n", "")
            out |= {v} if len(v) <= WINDOW else {v[i:i + WINDOW] for i in range(len(v) - WINDOW + 1)}
        return out


def leaked(output: str | bytes, cases: list[Case] | tuple[Case, ...]) -> dict[str, list[str]]:
    """Case id -> pieces of its secrets found in `output` (also lower-cased: FTS5 stores lower-case tokens).

    A piece counts when its bytes are in the output, or its lower-cased bytes in the lower-cased
    output. Many pieces (the whole corpus has some 50,000) against a short output are found by
    looking every window of the output up in an index of the pieces, rather than by one substring
    search a piece (a third of a second a call); the same pieces are found either way."""
    blob = output.encode() if isinstance(output, str) else output
    lowered = blob.lower()
    index = _index(tuple(cases))
    hit: dict[int, set[str]] = {}
    if index.count * (600 + len(blob)) < len(blob) * index.sizes * 200:   # ns: the searches against the windows
        for at, pieces in enumerate(index.per_case):
            found_here = {piece for piece, exact, lower in pieces if exact in blob or lower in lowered}
            if found_here:
                hit[at] = found_here
    else:
        for text, by_size in ((blob, index.exact), (lowered, index.lower)):
            for size, by_bytes in by_size.items():
                for window in _windows(text, size) & by_bytes.keys():
                    for at, piece in by_bytes[window]:
                        hit.setdefault(at, set()).add(piece)
    found: dict[str, list[str]] = {}
    for at, case in enumerate(cases):
        if at in hit:
            found[case.id] = sorted(hit[at])[:3]
    return found


class _Index:
    """The pieces of some cases: per case, and by their bytes (as written, and lower-cased) and length."""

    def __init__(self, cases: tuple[Case, ...]) -> None:
        self.per_case = [[(piece, piece.encode(), piece.lower().encode()) for piece in case.pieces()]
                         for case in cases]
        self.exact: dict[int, dict[bytes, list[tuple[int, str]]]] = {}
        self.lower: dict[int, dict[bytes, list[tuple[int, str]]]] = {}
        for at, pieces in enumerate(self.per_case):
            for piece, exact, lower in pieces:
                self.exact.setdefault(len(exact), {}).setdefault(exact, []).append((at, piece))
                self.lower.setdefault(len(lower), {}).setdefault(lower, []).append((at, piece))
        self.count = sum(map(len, self.per_case))
        self.sizes = len(self.exact) + len(self.lower)


@functools.lru_cache(maxsize=32)   # a few case sets a test process; each index holds every piece twice
def _index(cases: tuple[Case, ...]) -> _Index:
    return _Index(cases)


def _windows(text: bytes, size: int) -> set[bytes]:
    """Every run of `size` bytes of `text`."""
    return {text[i:i + size] for i in range(len(text) - size + 1)}


# -- tokens with a prefix of their own: found anywhere, labelled or not ---------------------------

PREFIXED: dict[str, tuple[str, str]] = {   # format -> (fake token, the variable it usually lives in)
    "github-classic": ("ghp_" + gen(B62, 36), "GITHUB_TOKEN"),
    "github-fine-grained": ("github_pat_11" + gen(B62, 20) + "_" + gen(B62, 59), "GH_TOKEN"),
    "github-oauth": ("gho_" + gen(B62, 36), "GITHUB_OAUTH"),
    "gitlab-pat": ("glpat-" + gen(URLSAFE, 20), "GITLAB_TOKEN"),
    "gitlab-runner": ("GR1348941" + gen(URLSAFE, 20), "RUNNER_TOKEN"),
    "slack-bot": ("xoxb-" + gen(string.digits, 12) + "-" + gen(string.digits, 13) + "-" + gen(B62, 24),
                  "SLACK_BOT_TOKEN"),
    "slack-app": ("xapp-1-A0" + gen(B62, 9) + "-" + gen(string.digits, 13) + "-" + gen(HEX, 64), "SLACK_APP_TOKEN"),
    "openai": ("sk-proj-" + gen(URLSAFE, 48) + "T3BlbkFJ" + gen(URLSAFE, 48), "OPENAI_API_KEY"),
    "anthropic": ("sk-ant-api03-" + gen(URLSAFE, 93) + "AA", "ANTHROPIC_API_KEY"),
    "google-api": ("AIza" + gen(URLSAFE, 35), "GOOGLE_API_KEY"),
    "google-oauth-secret": ("GOCSPX-" + gen(URLSAFE, 28), "GOOGLE_CLIENT_SECRET"),
    "google-oauth-token": ("ya29." + gen(URLSAFE, 120), "GOOGLE_ACCESS"),
    "stripe-secret": ("sk_live_51" + gen(B62, 96), "STRIPE_SECRET_KEY"),
    "stripe-restricted": ("rk_live_51" + gen(B62, 96), "STRIPE_RESTRICTED"),
    "stripe-webhook": ("whsec_" + gen(B62, 32), "STRIPE_WEBHOOK"),
    "npm": ("npm_" + gen(B62, 36), "NPM_TOKEN"),
    "pypi": ("pypi-AgEIcHlwaS5vcmc" + gen(URLSAFE, 70), "TWINE_PASSWORD"),
    "huggingface": ("hf_" + gen(B62, 34), "HF_TOKEN"),
    "jwt": ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ" + gen(URLSAFE, 60) + "." + gen(URLSAFE, 43), "SESSION"),
    "aws-access-key-id": ("AKIA" + gen(string.ascii_uppercase + "234567", 16), "AWS_ACCESS_KEY_ID"),
    "aws-sts-key-id": ("ASIA" + gen(string.ascii_uppercase + "234567", 16), "AWS_ACCESS_KEY_ID"),
    "sendgrid": ("SG." + gen(URLSAFE, 22) + "." + gen(URLSAFE, 43), "SENDGRID_API_KEY"),
    "twilio-api-key": ("SK" + gen(HEX, 32), "TWILIO_API_KEY"),
    "twilio-account-sid": ("AC" + gen(HEX, 32), "TWILIO_ACCOUNT_SID"),
    "mailgun-legacy": ("key-" + gen(HEX, 32), "MAILGUN_KEY"),
    "shopify-access": ("shpat_" + gen(HEX, 32), "SHOPIFY_ACCESS"),
    "shopify-shared-secret": ("shpss_" + gen(HEX, 32), "SHOPIFY_SHARED"),
    "square-access": ("sq0atp-" + gen(URLSAFE, 22), "SQUARE_ACCESS"),
    "square-oauth-secret": ("sq0csp-" + gen(URLSAFE, 43), "SQUARE_OAUTH"),
    "square-access-v2": ("EAAA" + gen(URLSAFE, 60), "SQUARE_TOKEN"),
    "newrelic-user": ("NRAK-" + gen(string.ascii_uppercase + string.digits, 27), "NEW_RELIC_API_KEY"),
    "newrelic-browser": ("NRJS-" + gen(HEX, 19), "NEW_RELIC_BROWSER"),
    "digitalocean": ("dop_v1_" + gen(HEX, 64), "DIGITALOCEAN_TOKEN"),
    "heroku-v2": ("HRKU-AA" + gen(URLSAFE, 58), "HEROKU_API_KEY"),
    "discord-bot": (base64.b64encode(b"712345678901234567").decode().rstrip("=") + "." + gen(URLSAFE, 6) + "."
                    + gen(URLSAFE, 38), "DISCORD_BOT"),
    "telegram-bot": ("7" + gen(string.digits, 9) + ":AA" + gen(URLSAFE, 33), "TELEGRAM_BOT"),
    "age": ("AGE-SECRET-KEY-1" + "".join(_rng.choice(BECH32) for _ in range(58)), "SOPS_AGE_KEY"),
    "vault": ("hvs." + gen(URLSAFE, 90), "VAULT_TOKEN"),
    "docker-hub": ("dckr_pat_" + gen(URLSAFE, 27), "DOCKERHUB_TOKEN"),
    "doppler": ("dp.pt." + gen(B62, 43), "DOPPLER_TOKEN"),
    "linear": ("lin_api_" + gen(B62, 40), "LINEAR_API_KEY"),
    "atlassian": ("ATATT3xFfGF0" + gen(URLSAFE, 170) + "=" + gen(HEX.upper(), 8), "JIRA_API_TOKEN"),
    "bitbucket": ("ATBB" + gen(B62, 32) + gen(HEX.upper(), 8), "BITBUCKET_APP_PASSWORD"),
    "databricks": ("dapi" + gen(HEX, 32), "DATABRICKS_TOKEN"),
    "postman": ("PMAK-" + gen(HEX, 24) + "-" + gen(HEX, 34), "POSTMAN_API_KEY"),
    "planetscale": ("pscale_tkn_" + gen(URLSAFE, 43), "PLANETSCALE_TOKEN"),
    "grafana-cloud": ("glc_" + gen(B62, 60), "GRAFANA_CLOUD"),
    "grafana-service-account": ("glsa_" + gen(B62, 32) + "_" + gen(HEX, 8), "GRAFANA_SA"),
    "sentry-user": ("sntryu_" + gen(HEX, 64), "SENTRY_AUTH"),
    "supabase": ("sbp_" + gen(HEX, 40), "SUPABASE_ACCESS"),
    "pulumi": ("pul-" + gen(HEX, 40), "PULUMI_ACCESS"),
    "tailscale": ("tskey-auth-k" + gen(B62, 11) + "CNTRL-" + gen(B62, 33), "TS_AUTHKEY"),
    "groq": ("gsk_" + gen(B62, 52), "GROQ_API_KEY"),
    "xai": ("xai-" + gen(B62, 80), "XAI_API_KEY"),
    "replicate": ("r8_" + gen(B62, 37), "REPLICATE_API_TOKEN"),
    "perplexity": ("pplx-" + gen(B62, 48), "PERPLEXITY_API_KEY"),
    "notion": ("ntn_" + gen(string.digits, 11) + gen(B62, 35), "NOTION_TOKEN"),
    "netlify": ("nfp_" + gen(B62, 40), "NETLIFY_AUTH"),
    "fly": ("fm2_lJPECAAAAAAAA" + gen(B62, 120), "FLY_API_TOKEN"),
    "onepassword-service": ("ops_eyJ" + gen(B62, 150), "OP_SERVICE_ACCOUNT"),
    "mapbox-secret": ("sk.eyJ1IjoiYWNtZS" + gen(B62, 40) + "." + gen(URLSAFE, 22), "MAPBOX_SECRET"),
    "terraform-cloud": (gen(B62, 14) + ".atlasv1." + gen(URLSAFE, 67), "TFE_TOKEN"),
    "facebook": ("EAAB" + gen(B62, 160), "FB_ACCESS"),
    "azure-ad-client-secret": (gen(B62, 3) + "8Q~" + gen(B62, 10) + "." + gen(B62, 10) + "~" + gen(B62, 12),
                               "AZURE_CLIENT_SECRET"),
}


def _prefixed_cases(fmt: str, token: str, var: str) -> list[Case]:
    contexts = {
        "prose": f"The new key is {token} (rotated today), keep it safe.",
        "export": f"export {var}={token}",
        "dotenv": f'# .env\n{var}="{token}"\nDEBUG=false',
        "json": json.dumps({"name": "prod", var.lower(): token, "retries": 3}),
        "yaml": f"env:\n  {var}: {token}\n  LOG_LEVEL: info",
        "header": f"curl -sS -H 'X-Auth: {token}' https://api.example.com/v1/me",
        "url": f"GET https://api.example.com/v1/report?token={token}&page=2 HTTP/1.1",
        "output": f"✓ Created token\n  value:   {token}\n  expires: 2026-12-01",
        "cli": f"acme-cli deploy --with-token {token} --region eu-west-1",
    }
    return [Case(fmt, ctx, text, (token,)) for ctx, text in contexts.items()]


# -- secrets recognised by the name or the command they are given to ------------------------------

AWS_SECRET = b64_with_slash(40)
AWS_KEY_ID = "AKIA" + gen(string.ascii_uppercase + "234567", 16)
AZURE_SECRET = PREFIXED["azure-ad-client-secret"][0]
AZURE_ACCOUNT_KEY = b64_with_slash(86) + "=="
SAS_SIG = gen(B62, 20) + "%2B" + gen(B62, 18) + "%3D"
HEROKU_UUID = "8f9c1d2e-4b5a-4c3d-9e8f-7a6b5c4d3e2f"
DD_API = gen(HEX, 32)
DD_APP = gen(HEX, 40)
HEX_TOKEN = gen(HEX, 32)
UUID_TOKEN = "3c9e2b7a-51f4-4d8e-a0b6-9f7c2e1d4a58"
TWILIO_SID = PREFIXED["twilio-account-sid"][0]
TWILIO_AUTH = gen(HEX, 32)
MAILGUN_NEW = gen(HEX, 32) + "-" + gen(HEX, 8) + "-" + gen(HEX, 8)
NR_LICENSE = gen(HEX, 36) + "NRAL"
PASSWORD = "Zq8!mK2#vT5w"
PASSWORD_WORDS = "correct horse battery staple"
PLAIN_PASSWORD = "hunterblue"      # a human password: no digit, no symbol
BASIC = base64.b64encode(f"deploy:{gen(B62, 16)}".encode()).decode()
BEARER = gen(URLSAFE, 40)
SESSION_COOKIE = gen(B62, 32)
CSRF_COOKIE = gen(B62, 40)
OKTA = "00" + gen(URLSAFE, 40)
AMZ_SIG = gen(HEX, 64)
AMZ_SESSION = "IQoJb3JpZ2luX2VjE" + gen(B64, 120)
AMZ_SESSION_URL = AMZ_SESSION.replace("+", "%2B").replace("/", "%2F")
DOCKER_AUTH = base64.b64encode(f"deploy:{gen(B62, 14)}".encode()).decode()
NPM_LEGACY = "5b1f4e2a-9c8d-4e7f-a6b5-3c2d1e0f9a8b"
WP_SALT = gen(B62 + "!@#$%^&*()-_[]{}<>~+=,.;:/?|", 64).replace("'", "")
K8S_B64 = base64.b64encode(b"Pr0d-" + gen(B62, 12).encode()).decode()
KUBE_KEY_DATA = base64.b64encode(b"-----BEGIN RSA PRIVATE KEY-----\n" + gen(B64, 120).encode()).decode()
SENTRY_DSN_KEY = gen(HEX, 32)
GIT_TOKEN_USER = gen(HEX, 40)
BCRYPT = "$2b$12$" + gen(B62 + "./", 53)
APR1 = "$apr1$" + gen(B62, 8) + "$" + gen(B62 + "./", 22)
SHA512_CRYPT = "$6$" + gen(B62, 16) + "$" + gen(B62 + "./", 86)

PEM_BODY = "\n".join(gen(B64, 64) for _ in range(6))
SSH_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB\n" + "\n".join(gen(B64, 70) for _ in range(4))
PGP_BODY = "\n".join(gen(B64, 64) for _ in range(5))
PUTTY_BODY = "\n".join(gen(B64, 64) for _ in range(4))
PUTTY_MAC = gen(HEX, 64)


def _labelled_cases() -> list[Case]:
    c: list[tuple[str, str, str, tuple[str, ...]]] = [
        # AWS secret access keys: in every file and output they come in, and on their own
        ("aws-secret-key", "credentials-file",
         f"[default]\naws_access_key_id = {AWS_KEY_ID}\naws_secret_access_key = {AWS_SECRET}\nregion = eu-west-1",
         (AWS_KEY_ID, AWS_SECRET)),
        ("aws-secret-key", "yaml", f'AWS_ACCESS_KEY_ID: "{AWS_KEY_ID}"\nAWS_SECRET_ACCESS_KEY: "{AWS_SECRET}"',
         (AWS_KEY_ID, AWS_SECRET)),
        ("aws-secret-key", "export", f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}", (AWS_SECRET,)),
        ("aws-secret-key", "sts-output", json.dumps({"Credentials": {
            "AccessKeyId": AWS_KEY_ID, "SecretAccessKey": AWS_SECRET, "SessionToken": AMZ_SESSION,
            "Expiration": "2026-11-12T12:00:00Z"}}, indent=2), (AWS_KEY_ID, AWS_SECRET, AMZ_SESSION)),
        ("aws-secret-key", "csv", f"Access key ID,Secret access key\n{AWS_KEY_ID},{AWS_SECRET}\n",
         (AWS_KEY_ID, AWS_SECRET)),
        ("aws-secret-key", "cli", f"aws configure set aws_secret_access_key {AWS_SECRET} --profile ci", (AWS_SECRET,)),
        ("aws-secret-key", "prose", f"the secret for the ci user is {AWS_SECRET}, rotate it monthly", (AWS_SECRET,)),
        ("aws-secret-key", "terraform",
         f'provider "aws" {{\n  access_key = "{AWS_KEY_ID}"\n  secret_key = "{AWS_SECRET}"\n}}',
         (AWS_KEY_ID, AWS_SECRET)),
        # Azure
        ("azure-client-secret", "powershell", f'$env:AZURE_CLIENT_SECRET = "{AZURE_SECRET}"', (AZURE_SECRET,)),
        ("azure-client-secret", "json", json.dumps({"appId": "0f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a",
                                                    "password": AZURE_SECRET, "tenant": "acme"}), (AZURE_SECRET,)),
        ("azure-client-secret", "cli", f"az login --service-principal -u 0f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a "
                                       f"-p {AZURE_SECRET} --tenant acme.onmicrosoft.com", (AZURE_SECRET,)),
        ("azure-client-secret", "yaml", f"azure:\n  client_secret: {AZURE_SECRET}\n  client_id: app", (AZURE_SECRET,)),
        ("azure-storage-key", "connection-string",
         f"DefaultEndpointsProtocol=https;AccountName=acmeprod;AccountKey={AZURE_ACCOUNT_KEY};EndpointSuffix=core.windows.net",
         (AZURE_ACCOUNT_KEY,)),
        ("azure-sas", "url", f"https://acmeprod.blob.core.windows.net/backups/db.bak?sv=2022-11-02&ss=b&srt=o&sp=r"
                             f"&se=2026-12-01T00:00:00Z&spr=https&sig={SAS_SIG}", (SAS_SIG,)),
        # unlabelled-looking values that their name gives away
        ("heroku-uuid", "export", f"export HEROKU_API_KEY={HEROKU_UUID}", (HEROKU_UUID,)),
        ("heroku-uuid", "netrc", f"machine api.heroku.com\n  login dev@acme.io\n  password {HEROKU_UUID}\n",
         (HEROKU_UUID,)),
        ("heroku-uuid", "output", f"$ heroku authorizations:create\nCreating OAuth Authorization... done\n"
                                  f"Client:      <none>\nID:          0a1b2c3d\nToken:       {HEROKU_UUID}",
         (HEROKU_UUID,)),
        ("datadog", "env", f"DD_API_KEY={DD_API}\nDD_APP_KEY={DD_APP}\nDD_SITE=datadoghq.eu", (DD_API, DD_APP)),
        ("datadog", "header", f'curl -X GET "https://api.datadoghq.com/api/v1/validate" -H "DD-API-KEY: {DD_API}" '
                              f'-H "DD-APPLICATION-KEY: {DD_APP}"', (DD_API, DD_APP)),
        ("datadog", "yaml", f"api_key: {DD_API}\nsite: datadoghq.com\nlogs_enabled: true", (DD_API,)),
        ("hex-token", "header", f"X-Api-Key: {HEX_TOKEN}", (HEX_TOKEN,)),
        ("hex-token", "cli-flag", f"./sync --token {HEX_TOKEN} --dry-run", (HEX_TOKEN,)),
        ("hex-token", "space", f"apikey {HEX_TOKEN}", (HEX_TOKEN,)),
        ("hex-token", "json", json.dumps({"api_key": HEX_TOKEN, "region": "eu"}), (HEX_TOKEN,)),
        ("hex-token", "query", f"https://api.weather.example/v2/forecast?q=Paris&api_key={HEX_TOKEN}", (HEX_TOKEN,)),
        ("hex-token", "query-key", f"https://maps.example.com/staticmap?center=0,0&key={HEX_TOKEN}&size=600x300",
         (HEX_TOKEN,)),
        ("uuid-token", "space", f"apikey {UUID_TOKEN}", (UUID_TOKEN,)),
        ("uuid-token", "header", f"curl -H 'X-API-KEY: {UUID_TOKEN}' https://api.example.com", (UUID_TOKEN,)),
        ("uuid-token", "json", json.dumps({"apiKey": UUID_TOKEN}), (UUID_TOKEN,)),
        ("uuid-token", "cli-flag", f"terraform-provider-acme --api-key {UUID_TOKEN}", (UUID_TOKEN,)),
        ("uuid-token", "subscription-key", f"Ocp-Apim-Subscription-Key: {HEX_TOKEN}", (HEX_TOKEN,)),
        ("twilio-auth-token", "env", f"TWILIO_ACCOUNT_SID={TWILIO_SID}\nTWILIO_AUTH_TOKEN={TWILIO_AUTH}",
         (TWILIO_SID, TWILIO_AUTH)),
        ("twilio-auth-token", "code", f'client = Client("{TWILIO_SID}", "{TWILIO_AUTH}")', (TWILIO_SID, TWILIO_AUTH)),
        ("twilio-auth-token", "curl",
         f"curl -X POST https://api.twilio.com/2010-04-01/Accounts/{TWILIO_SID}/Messages.json "
         f"-u {TWILIO_SID}:{TWILIO_AUTH}", (TWILIO_SID, TWILIO_AUTH)),
        ("mailgun", "env", f"MAILGUN_API_KEY={MAILGUN_NEW}", (MAILGUN_NEW,)),
        ("mailgun", "curl", f"curl -s --user 'api:{MAILGUN_NEW}' https://api.mailgun.net/v3/mg.acme.io/messages",
         (MAILGUN_NEW,)),
        ("newrelic-license", "env", f"NEW_RELIC_LICENSE_KEY={NR_LICENSE}", (NR_LICENSE,)),
        ("newrelic-license", "yaml", f"common: &default_settings\n  license_key: '{NR_LICENSE}'\n  app_name: api",
         (NR_LICENSE,)),
        # passwords given to a variable or a field
        ("password", "pgpassword", "PGPASSWORD=" + PLAIN_PASSWORD + " psql -h db.internal -U app billing",
         (PLAIN_PASSWORD,)),
        ("password", "mysql-pwd", f"MYSQL_PWD={PASSWORD} mysql -u root", (PASSWORD,)),
        ("password", "env", f"DB_PASSWORD={PASSWORD}\nDB_HOST=db.internal", (PASSWORD,)),
        ("password", "json", json.dumps({"username": "admin", "password": PASSWORD}), (PASSWORD,)),
        ("password", "json-escaped", json.dumps(json.dumps({"user": "admin", "password": PASSWORD})), (PASSWORD,)),
        ("password", "yaml", f"database:\n  user: app\n  password: {PASSWORD}\n  host: db", (PASSWORD,)),
        ("password", "passphrase", f'ssh_key_passphrase: "{PASSWORD_WORDS}"', (PASSWORD_WORDS,)),
        ("password", "flag-equals", f"wget --user=dev --password={PASSWORD} https://files.acme.io/a.tgz", (PASSWORD,)),
        ("password", "xml", f"<server>\n  <id>nexus</id>\n  <username>ci</username>\n"
                            f"  <password>{PASSWORD}</password>\n</server>", (PASSWORD,)),
        ("password", "dotnet", f'<add key="DbPassword" value="{PASSWORD}" />', (PASSWORD,)),
        ("password", "jdbc", f"jdbc:mysql://db.internal:3306/app?user=app&password={PASSWORD}&useSSL=true",
         (PASSWORD,)),
        ("password", "sqlserver", f"Server=db.internal;Database=app;User Id=sa;Password={PASSWORD};Encrypt=true",
         (PASSWORD,)),
        ("password", "php-define", f"define('DB_PASSWORD', '{PASSWORD}');", (PASSWORD,)),
        ("password", "ruby-hash", f"ActiveRecord::Base.establish_connection(:password => '{PASSWORD}', :host => 'db')",
         (PASSWORD,)),
        ("password", "kubectl", f"kubectl create secret generic db --from-literal=password={PASSWORD}", (PASSWORD,)),
        ("password", "docker-env", f"docker run -d -e POSTGRES_PASSWORD={PASSWORD} -p 5432:5432 postgres:16",
         (PASSWORD,)),
        ("password", "ansible", f"web1 ansible_host=10.0.0.5 ansible_user=deploy ansible_ssh_pass={PASSWORD}",
         (PASSWORD,)),
        ("password", "sshpass-env", f"SSHPASS={PASSWORD} sshpass -e ssh deploy@10.0.0.5", (PASSWORD,)),
        ("password", "spring", f"spring.datasource.password={PASSWORD}\nspring.datasource.username=app", (PASSWORD,)),
        ("password", "git-credential", f"protocol=https\nhost=github.com\nusername=dev\npassword={GIT_TOKEN_USER}\n",
         (GIT_TOKEN_USER,)),
        ("password", "pypirc", f"[pypi]\nusername = __token__\npassword = {PREFIXED['pypi'][0]}",
         (PREFIXED["pypi"][0],)),
        ("password", "k8s-secret", f"apiVersion: v1\nkind: Secret\ndata:\n  password: {K8S_B64}\n", (K8S_B64,)),
        ("wordpress-salt", "php-define", f"define('NONCE_SALT', '{WP_SALT}');", (WP_SALT,)),
        # command lines
        ("cli-password", "mysql-attached", f"mysql -u root -p{PASSWORD} -h db.internal billing", (PASSWORD,)),
        ("cli-password", "mysql-quoted", f"mysql -uroot -p'{PASSWORD_WORDS}' billing", (PASSWORD_WORDS,)),
        ("cli-password", "mysql-space", f"mysql -u root --password {PASSWORD} billing", (PASSWORD,)),
        ("cli-password", "mysqldump", f"mysqldump -u backup -p{PLAIN_PASSWORD} --all-databases > all.sql",
         (PLAIN_PASSWORD,)),
        ("cli-password", "mariadb", f"mariadb -h db -u app -p{PASSWORD} -e 'select 1'", (PASSWORD,)),
        ("cli-password", "docker-login", f"docker login -u deploy -p {PASSWORD} registry.acme.io", (PASSWORD,)),
        ("cli-password", "docker-login-long", f"docker login registry.acme.io --username deploy --password {PASSWORD}",
         (PASSWORD,)),
        ("cli-password", "podman-login", f"podman login -u deploy -p {PLAIN_PASSWORD} quay.io", (PLAIN_PASSWORD,)),
        ("cli-password", "helm-login", f"helm registry login registry.acme.io --username ci --password {PASSWORD}",
         (PASSWORD,)),
        ("cli-password", "curl-u", f"curl -u admin:{PASSWORD} https://jenkins.acme.io/api/json", (PASSWORD,)),
        ("cli-password", "curl-user", f'curl --user "admin:{PASSWORD}" https://jenkins.acme.io/api/json', (PASSWORD,)),
        ("cli-password", "curl-multiline", f"curl -X POST https://es.internal:9200/_bulk \\\n  -H 'Content-Type: "
                                           f"application/json' \\\n  -u elastic:{PLAIN_PASSWORD}", (PLAIN_PASSWORD,)),
        ("cli-password", "curl-proxy", f"curl -x http://proxy:3128 -U proxyuser:{PASSWORD} https://example.org",
         (PASSWORD,)),
        ("cli-password", "httpie", f"http -a admin:{PASSWORD} GET https://api.acme.io/users", (PASSWORD,)),
        ("cli-password", "sshpass", f"sshpass -p '{PASSWORD}' ssh deploy@10.0.0.5 uptime", (PASSWORD,)),
        ("cli-password", "sshpass-attached", f"sshpass -p{PLAIN_PASSWORD} scp backup.tgz deploy@10.0.0.5:/srv",
         (PLAIN_PASSWORD,)),
        ("cli-password", "htpasswd-b", f"htpasswd -bc /etc/nginx/.htpasswd admin {PASSWORD}", (PASSWORD,)),
        ("cli-password", "htpasswd-nb", f"htpasswd -nbB admin {PLAIN_PASSWORD}", (PLAIN_PASSWORD,)),
        ("cli-password", "redis-cli", f"redis-cli -h cache.internal -a {PASSWORD} ping", (PASSWORD,)),
        ("cli-password", "zip", f"zip -r -P {PASSWORD} backup.zip ./data", (PASSWORD,)),
        ("cli-password", "7z", f"7z a -p{PASSWORD} -mhe=on backup.7z ./data", (PASSWORD,)),
        ("cli-password", "openssl", f"openssl pkcs12 -export -in cert.pem -inkey key.pem -out cert.p12 "
                                    f"-passout pass:{PASSWORD}", (PASSWORD,)),
        ("cli-password", "keytool", f"keytool -importkeystore -srckeystore a.p12 -destkeystore a.jks -storepass "
                                    f"{PASSWORD} -keypass {PLAIN_PASSWORD}", (PASSWORD, PLAIN_PASSWORD)),
        ("cli-password", "netrc-line", f"machine api.github.com login dev password {GIT_TOKEN_USER}",
         (GIT_TOKEN_USER,)),
        ("cli-password", "mongosh", f'mongosh "mongodb+srv://app:{PASSWORD}@cluster0.ab1cd.mongodb.net/prod"',
         (PASSWORD,)),
        ("cli-password", "psql-url", f'psql "postgresql://app:{PLAIN_PASSWORD}@db.internal:5432/billing?sslmode=require"',
         (PLAIN_PASSWORD,)),
        # URLs
        ("url-credentials", "redis", f"REDIS_URL=redis://:{PASSWORD}@cache.internal:6379/0", (PASSWORD,)),
        ("url-credentials", "amqp", f"broker_url = 'amqp://worker:{PLAIN_PASSWORD}@mq.internal:5672//'",
         (PLAIN_PASSWORD,)),
        ("url-credentials", "at-in-password", "postgres://app:p@ss" + PLAIN_PASSWORD + "@db.internal/app",
         ("p@ss" + PLAIN_PASSWORD,)),
        ("url-credentials", "x-access-token", f"git clone https://x-access-token:{GIT_TOKEN_USER}@github.com/acme/app.git",
         (GIT_TOKEN_USER,)),
        ("url-credentials", "token-as-user", f"git remote set-url origin https://{GIT_TOKEN_USER}@github.com/acme/app.git",
         (GIT_TOKEN_USER,)),
        ("url-credentials", "sentry-dsn", f"SENTRY_DSN=https://{SENTRY_DSN_KEY}@o123456.ingest.sentry.io/4505",
         (SENTRY_DSN_KEY,)),
        ("url-credentials", "access-token-query", f"https://graph.facebook.com/me?fields=id&access_token={BEARER}",
         (BEARER,)),
        ("url-credentials", "client-secret-query", f"POST /oauth/token?grant_type=client_credentials&client_id=app&"
                                                   f"client_secret={BEARER}", (BEARER,)),
        ("url-credentials", "presigned-s3", f"https://acme.s3.amazonaws.com/r.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&"
                                            f"X-Amz-Credential={AWS_KEY_ID}%2F20261112%2Feu-west-1%2Fs3%2Faws4_request&"
                                            f"X-Amz-Security-Token={AMZ_SESSION_URL}&X-Amz-Signature={AMZ_SIG}",
         (AWS_KEY_ID, AMZ_SIG, AMZ_SESSION_URL)),
        # HTTP headers
        ("authorization", "basic", f'curl -H "Authorization: Basic {BASIC}" https://api.acme.io', (BASIC,)),
        ("authorization", "bearer", f"Authorization: Bearer {BEARER}\nAccept: application/json", (BEARER,)),
        ("authorization", "token", f"Authorization: Token {DD_APP}", (DD_APP,)),
        ("authorization", "raw", f"-H 'Authorization: {HEX_TOKEN}'", (HEX_TOKEN,)),
        ("authorization", "ssws", f"Authorization: SSWS {OKTA}", (OKTA,)),
        ("authorization", "proxy", f"Proxy-Authorization: Basic {BASIC}", (BASIC,)),
        ("authorization", "json", json.dumps({"headers": {"Authorization": f"Bearer {BEARER}"}}), (BEARER,)),
        ("authorization", "aws4", f"Authorization: AWS4-HMAC-SHA256 Credential={AWS_KEY_ID}/20261112/eu-west-1/s3/"
                                  f"aws4_request, SignedHeaders=host;x-amz-date, Signature={AMZ_SIG}",
         (AWS_KEY_ID, AMZ_SIG)),
        ("authorization", "prose", f"then send it as Bearer {BEARER} in the header", (BEARER,)),
        ("cookie", "request", f"Cookie: sessionid={SESSION_COOKIE}; csrftoken={CSRF_COOKIE}; theme=dark",
         (SESSION_COOKIE, CSRF_COOKIE)),
        ("cookie", "response", f"Set-Cookie: session={SESSION_COOKIE}; Path=/; HttpOnly; Secure", (SESSION_COOKIE,)),
        # config files of tools
        ("npmrc", "auth-token", f"//registry.npmjs.org/:_authToken={NPM_LEGACY}\nalways-auth=true", (NPM_LEGACY,)),
        ("npmrc", "auth", f"_auth={DOCKER_AUTH}\nemail=dev@acme.io", (DOCKER_AUTH,)),
        ("docker-config", "json", json.dumps({"auths": {"registry.acme.io": {"auth": DOCKER_AUTH}}}, indent=2),
         (DOCKER_AUTH,)),
        ("kubeconfig", "yaml", f"users:\n- name: ci\n  user:\n    client-key-data: {KUBE_KEY_DATA}\n"
                               f"    token: {PREFIXED['jwt'][0]}", (KUBE_KEY_DATA, PREFIXED["jwt"][0])),
        # private keys and password hashes
        ("private-key", "rsa", f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
         (PEM_BODY,)),
        ("private-key", "openssh",
         f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SSH_BODY}\n-----END OPENSSH PRIVATE KEY-----", (SSH_BODY,)),
        ("private-key", "pkcs8-encrypted", f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{PEM_BODY}\n"
                                           "-----END ENCRYPTED PRIVATE KEY-----", (PEM_BODY,)),
        ("private-key", "pgp", f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{PGP_BODY}\n=Ab12\n"
                               "-----END PGP PRIVATE KEY BLOCK-----", (PGP_BODY,)),
        ("private-key", "json-escaped", json.dumps({"type": "service_account", "private_key_id": DD_APP,
                                                    "private_key": f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n"
                                                                   "-----END PRIVATE KEY-----\n"}),
         (PEM_BODY.replace("\n", "\\n"),)),
        ("private-key", "putty", "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: deploy\n"
                                 "Public-Lines: 1\nAAAAB3NzaC1yc2EAAAADAQABAAABAQ\n"
                                 f"Private-Lines: 4\n{PUTTY_BODY}\nPrivate-MAC: {PUTTY_MAC}",
         (PUTTY_BODY, PUTTY_MAC)),
        ("password-hash", "bcrypt", f"admin:{BCRYPT}", (BCRYPT[7:],)),
        ("password-hash", "htpasswd-output", f"$ htpasswd -nb admin x\nadmin:{APR1}", (APR1[6:],)),
        ("password-hash", "shadow", f"deploy:{SHA512_CRYPT}:19700:0:99999:7:::", (SHA512_CRYPT[20:],)),
        ("slack-webhook", "json", json.dumps({"webhook": "https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF2/"
                                                         + gen(B62, 24)}), ()),
        ("discord-webhook", "curl", "curl -H 'Content-Type: application/json' -d '{\"content\":\"hi\"}' "
                                    "https://discord.com/api/webhooks/1234567890123456789/" + gen(URLSAFE, 68), ()),
    ]
    cases = [Case(fmt, ctx, text, values) for fmt, ctx, text, values in c]
    # webhook URLs: the secret is the path after the ids
    for i, case in enumerate(cases):
        if not case.values:
            secret = case.text.rsplit("/", 1)[1].split('"')[0]
            cases[i] = Case(case.fmt, case.context, case.text, (secret,))
    return cases


SECRET_CASES: tuple[Case, ...] = tuple(
    [case for fmt, (token, var) in PREFIXED.items() for case in _prefixed_cases(fmt, token, var)]
    + _labelled_cases())

FORMATS = sorted({case.fmt for case in SECRET_CASES})


# -- look-alikes: every one must come through scrub() unchanged -----------------------------------

GIT_SHA = "3f2a1b9c4d5e6f708192a3b4c5d6e7f8091a2b3c"
LOOKALIKES: tuple[str, ...] = (
    # code that names or reads a secret without holding one
    "apiKeySource: 'none'",
    "token: this.options.authToken",
    "password_field = form.password",
    "token = tokens[0]",
    'api_key = os.environ["API_KEY"]',
    "secret = get_secret(name)",
    "SECRET_KEY = os.environ['DJANGO_SECRET_KEY']",
    "password = getpass.getpass('Password: ')",
    'token = request.headers.get("X-Api-Key")',
    "self.password = password",
    "password=hash_password(raw)",
    "user.set_password(new_password)",
    "def login(username: str, password: str) -> Token:",
    "private readonly apiKey: string;",
    "constructor(private token: string) {}",
    'const token = localStorage.getItem("token");',
    "const { token } = req.body;",
    'if (!token) throw new Error("missing token")',
    'let token = env::var("GITHUB_TOKEN")?;',
    "pub token: String,",
    'Password string `json:"password"`',
    "apiKey: process.env.API_KEY,",
    "password = var.db_password",
    "secret_string = jsonencode({ username = var.user })",
    'headers = {"Authorization": f"Bearer {self.token}"}',
    "auth = HTTPBasicAuth(user, password)",
    "tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')",
    "sort_key = lambda item: item[0]",
    "cache_key = f'user:{user_id}'",
    "for key, value in settings.items():",
    "primary_key=True, foreign_key='users.id'",
    "if not token: raise AuthError('missing token')",
    "def test_refresh_token_rotates_after_expiry_window_2():",
    "password_min_length = 12",
    "token_type: \"bearer\"",
    '"max_tokens": 4096, "total_tokens": 98765432',
    "token_count: 1234567",
    '"usage": {"prompt_tokens": 1200, "completion_tokens": 350}',
    "password: string;",
    'def get_api_key(self) -> str:',
    # configuration that refers to a secret kept elsewhere
    "password: ${DB_PASSWORD}",
    "spring.datasource.password=${DB_PASSWORD}",
    'password: "{{ vault_db_password }}"',
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "env:\n  NPM_TOKEN: ${{ secrets.NPM_TOKEN }}\nsecrets: inherit",
    "export GITHUB_TOKEN=$(gh auth token)",
    'export OPENAI_API_KEY="$(security find-generic-password -s openai -w)"',
    'OP_TOKEN: "op://Engineering/Deploy/credential"',
    "db_password: !vault |",
    "MYSQL_ROOT_PASSWORD_FILE: /run/secrets/db_root_password",
    "private_key_path: ~/.ssh/id_ed25519",
    "credentials: ./secrets/gcp-sa.json",
    "secret_name: prod/billing/db",
    "token_url: https://oauth2.googleapis.com/token",
    '"token_uri": "https://oauth2.googleapis.com/token"',
    '"authorization_endpoint": "https://accounts.google.com/o/oauth2/v2/auth"',
    "grant_type=authorization_code&response_type=code",
    "git config --global credential.helper store",
    "auth: true",
    '"auth": null',
    "secretKeyRef:\n  name: db\n  key: password",
    'securitySchemes:\n  ApiKeyAuth:\n    type: apiKey\n    in: header\n    name: X-API-Key',
    '"apiKey": "<YOUR_API_KEY>"',
    'api_key: "YOUR_API_KEY_HERE"',
    "OPENAI_API_KEY=sk-...",
    "token: xxxxxxxxxxxxxxxx",
    "password: '********'",
    "Authorization: Bearer $TOKEN",
    "Authorization: Bearer <token>",
    'curl -H "Authorization: Bearer $(gcloud auth print-access-token)" https://run.googleapis.com',
    "WWW-Authenticate: Bearer realm=\"api\"",
    'KeyId: "1234abcd-12ab-34cd-56ef-1234567890ab"',
    "Idempotency-Key: 550e8400-e29b-41d4-a716-446655440000",
    # command lines that only look like they pass a password
    "docker login -u deploy --password-stdin registry.acme.io",
    "echo $CR_PAT | docker login ghcr.io -u bob --password-stdin",
    "mysql -u root -p",
    "mysql -u root -p billing",
    "mysql -h db.internal -P 3306 -u app -p",
    "docker run -p 8080:80 -e POSTGRES_DB=app nginx:1.25",
    "docker run --rm -u 1000:1000 -v $PWD:/src node:20 npm ci",
    "curl -u admin https://jenkins.acme.io/api/json",
    'curl -u "$JENKINS_USER:$JENKINS_TOKEN" https://jenkins.acme.io/api/json',
    "ssh -p 2222 deploy@10.0.0.5",
    "scp -P 2222 backup.tgz deploy@10.0.0.5:/srv",
    "mkdir -p src/billing/tokens",
    "psql -p 5433 -h localhost -U app billing",
    "python -m pytest -p no:cacheprovider tests/test_auth.py",
    "git log -p --follow src/auth/token.py",
    "kubectl create secret generic db-creds --from-file=./password.txt",
    "aws configure get aws_secret_access_key --profile ci",
    "keyring set myservice alice",
    "--token-file /var/run/secrets/kubernetes.io/serviceaccount/token",
    "ssh-keygen -t ed25519 -C 'dev@acme.io' -f ~/.ssh/id_ed25519",
    "[sudo] password for dev:",
    "Enter password:",
    "FATAL:  password authentication failed for user \"app\"",
    'git commit -m "Remove hardcoded password from config"',
    "rotate the API key every 90 days",
    "the token expired, refresh it with `gh auth refresh`",
    "the secret sauce is the cache warm-up",
    "hash_password: the empty input, the timeout and the happy path.",
    "E   KeyError: 'access_token'\n=========================== short test summary info ============================",
    "Tests: 12 passed, 0 failed\npass: 12 fail: 0",
    "passwordless sudo is configured for the deploy user",
    # usage text and prose about credentials
    "usage: mysql [-u USER] [-p PASSWORD] [--password PASSWORD] DATABASE",
    "docker login -u USER -p PASSWORD registry.example.com",
    "curl -u user:pass https://example.com/api",
    "a missing or wrong `Authorization: Bearer` gets 401 when a token is configured",
    "Passwords in URLs (`postgresql://user:secret@host`) are shown as `***`.",
    "Pass `--password-file` or `-p` to read it; never `--password <pw>` on a shared host.",
    "`mysql`/`mysqldump` with `-p<pw>` put the password in the process list.",
    'ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"',
    'rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz123456789")',
    # ids, hashes and digests
    f"commit {GIT_SHA}\nAuthor: Dev <dev@acme.io>\nDate:   Tue Nov 10 10:00:00 2026 +0100\n\n    fix token refresh",
    f"[main {GIT_SHA[:7]}] fix: refresh the token before expiry\n 2 files changed, 14 insertions(+)",
    f"To github.com:acme/app.git\n   {GIT_SHA[:7]}..9c8d7e6  main -> main",
    "Merge: 1a2b3c4 5d6e7f8",
    "index 83db48f..bf269f4 100644",
    f"git rev-parse HEAD\n{GIT_SHA}",
    "session_id: 550e8400-e29b-41d4-a716-446655440000",
    '{"id": "550e8400-e29b-41d4-a716-446655440000", "status": "done"}',
    "X-Request-Id: 7c9e6679-7425-40de-944b-e07fc1f90ae7",
    "request 550e8400-e29b-41d4-a716-446655440000 failed",
    "ID 550E8400-E29B-41D4-A716-446655440000",
    "trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7",
    "d41d8cd98f00b204e9800998ecf8427e  empty.txt",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    '"integrity": "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="',
    'lodash@^4.17.21:\n  version "4.17.21"\n  resolved "https://registry.yarnpkg.com/lodash/-/lodash-4.17.21.tgz'
    '#679591c564c3bffaae8454cf0b3df370c3d6911c"\n  integrity sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+'
    'LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg==',
    '{file = "requests-2.31.0-py3-none-any.whl", '
    'hash = "sha256:58cd2187c01e70e6e26505bca751777aa9f2ee0b7f4300988b709f44e013003f"}',
    'checksum = "5a1d2c3b4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"',
    "golang.org/x/text v0.14.0 h1:ScX5w1eTa3QqT8oi6+ziP7dTV1S2+ALU0bI+0zXKWiQ=",
    "golang.org/x/text v0.14.0/go.mod h1:18ZOQIKpY8NJVqYksKHtTdi31H5itFRjB5/qKTNYzSU=",
    "requests==2.31.0 --hash=sha256:58cd2187c01e70e6e26505bca751777aa9f2ee0b7f4300988b709f44e013003f",
    'integrity="sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC" crossorigin="anonymous"',
    "IMAGE ID       sha256:9c7a54a9a43cca047013b82af109fe963fde787f63f9e016fdc3384500c2823d",
    "CONTAINER ID   IMAGE          COMMAND\n4c01db0b339c   postgres:16    \"docker-entrypoint.s…\"",
    "ETag: \"33a64df551425fcc55e4d42a148795d9f25f89d4\"",
    '"sha": "3f2a1b9c4d5e6f708192a3b4c5d6e7f8091a2b3c", "node_id": "C_kwDOABCD"',
    "01ARZ3NDEKTSV4RRFFQ69G5FAV",
    "nmem://project:billing-api/observations/42",
    "ObjectId(\"507f1f77bcf86cd799439011\")",
    "payment pi_3MtwBwLkdIwHu7ix28a3tqPa for cus_NffrFeUfNV2Hib",
    "pod/api-7d9f8b6c5d-x2k9p   1/1     Running   0          3d",
    "arn:aws:iam::123456789012:role/deploy",
    '"UserId": "123456789012", "Account": "123456789012"',
    "md5sum: 9e107d9d372bb6826bd81d3542a419d6",
    # data and public keys
    ("background: url(data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYP"
     "hfDwAChwGA60e6kgAAAABJRU5ErkJggg==)"),
    "<img src=\"data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7\">",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl dev@laptop",
    ("github.com ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQCj7ndNxQowgcQnjshcLrqPEiiphnt+VTTvDP6mHBL9j1aNUkY4U"
     "e1gvwnGLVlOhGeYrnZaMgRK6+PKCUXaDbC7qtbW8gIkhL7aGCsOr/C56SJMy/BCZfxd1nWzAOxSDPgVsmerOBYfNqltV9/hWCqBy"
     "wINIR+5dIg6JTJ72pcEpEjcYgXkE2YEFXV1JHnsKgbLWNlhScqb2UmyRkQyytRLtL+38TGxkxCflmO+5Z8CSSNY7GidjMIZ7Q4zM"
     "jA2n1nGrlTDkzwDCsw+wqFPGQA179cnfGWOWRVruj16z6XyvxvjJwbz0wQZ75XK5tKSb7FNyeIEs4TT4jk+S4dhPeAUC5y+bDYir"
     "YgM4GC7uEnztnZyaVWQ7B381AK4Qdrwt51ZqExKbQpTUNn+EjqoTwvqNj4kqx5QUCI0ThS/YkOxJCXmPUWZbhjpCg56i+2aB6CmK"
     "2JGhn57K5mj0MNdBXA4/WnwH6XoPWJzK5Nyu2zB3nAZp+S5hpQs+p1vN1/wsjk="),
    ("-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\nRTESM"
     "BAGA1UEChMJQmFsdGltb3JlMRMwEQYDVQQLEwpDeWJlclRydXN0MSIwIAYD\n-----END CERTIFICATE-----"),
    ("-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo\n4lgOEe"
     "PzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u\n-----END PUBLIC KEY-----"),
    # colours, versions, paths, URLs
    "color: #ff00aa; background: #3f2a1b; border-color: #ABCDEF;",
    "tokenizers==0.15.2\nkeyring>=24.3.0\npython-jose[cryptography]==3.3.0",
    '"jsonwebtoken": "^9.0.2", "passport-jwt": "^4.0.1", "next-auth": "4.24.5", "keytar": "7.9.0"',
    '"secret-handshake": "1.1.0", "oauth": "0.10.0", "@auth/core": "0.18.1"',
    "/home/dev/code/billing-api/src/billing/token_refresh.py",
    "src/main/java/org/springframework/security/oauth2/client/web/OAuth2AuthorizationCodeGrantFilter.java",
    "OAuth2AuthorizedClientArgumentResolver",
    "app/Http/Controllers/Api/V1/PasswordResetController.php",
    "pytest tests/test_invoice.py::test_total_rounds_half_up -q",
    "https://docs.python.org/3/library/secrets.html#secrets.token_urlsafe",
    "https://github.com/acme/app/blob/main/src/auth/TokenStore.ts#L42",
    "https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=42s",
    "postgres://db.internal:5432/billing",
    "git@github.com:acme/billing-api.git",
    "ssh://git@github.com/acme/billing-api.git",
    "git push origin feat/token-rotation",
    "PWD=/home/dev/code/billing-api\nOLDPWD=/home/dev/code",
    "Cookie: theme=dark; lang=en-GB",
    "2026-11-12T10:00:00Z INFO token refreshed for user 42 in 0.8s",
    "Content-Security-Policy: script-src 'self' 'nonce-2726c7f26c'",
)
