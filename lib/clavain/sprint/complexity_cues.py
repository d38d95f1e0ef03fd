"""The vocabulary of the complexity classifier (`complexity`) and the text helpers it reads a
request with: words in any script (Chinese and Japanese count about one word per two
characters, since they are written without spaces), the separate asks of a compound request,
and cue matching.

Two kinds of vocabulary:
- word lists (`TRIVIAL`, `RESEARCH_*`, `MODERATE`, …): whole words, or whole phrases;
- stem patterns (`CONCERNS`, `BIG_CHANGE`, `SCOPE`, `RISK`, …): regular-expression fragments
  that name a family of forms (`authenticat\\w*` for authenticate, authentication …), matched
  at word edges. A system-wide concern (authentication, password hashing, payments, a
  database, the service layout, a framework) counts as large work when the request changes
  it (`BIG_CHANGE`: rewrite, replace, migrate, split …), reaches everywhere (`SCOPE`), or
  risks live data (`RISK`); its mere mention (a typo in the login page) does not, nor does a
  quoted string (`unquote`: what a request quotes is content).
Each list carries Chinese and Japanese equivalents of its commonest entries. The cues in the
shape of a phrase (a value set to another, a capability being built …) are `complexity_forms`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable

RESEARCH_STRONG = (
    "research", "investigate", "investigation", "brainstorm", "evaluate", "spike", "prototype",
    "rfc", "design doc", "pros/cons", "pros and cons", "tradeoffs", "trade-offs",
    "alternatives", "comparison", "look into", "thinking of", "considering", "figure out",
    "find out", "think about", "thinking about", "dig into", "dig in", "report back", "assess",
    "assessment", "write up", "write-up",
    "recommend", "recommendation", "suggest", "suggestions", "no clue", "propose", "proposal",
    "what the options are", "design how",
    "experiment", "how should we", "what's the best way", "is there any way", "where do we",
    "no idea", "hunch", "intermittent", "intermittently", "can't repro", "cannot reproduce",
    "not sure when", "once a week", "twice a week", "once or twice", "a few times a day",
    "every few minutes", "few reports", "compare", "comparing", "feasible", "feasibility",
    "options for", "explore what", "explore using", "explore alternatives", "worth it",
    "see if", "could be", "or stay", "or keep", "or use", "why is", "why does",
    "what's causing",
    "调研", "调查", "研究一下", "评估", "选型", "可行性", "是否应该", "应不应该", "要不要",
    "原因不明", "調査", "検討", "べきか", "比較", "評価", "選定")
RESEARCH_WEAK = ("explore", "should we", "why", "random", "randomly", "sometimes",
                 "occasional", "occasionally", "flaky", "weird", "whether", "drift", "audit",
                 "go through", "tell me", "which one", "don't know", "dont know",
                 "do not know", "unclear", "risks", "plan for how",
                 "为什么", "偶尔", "有时", "是否", "なぜ", "たまに", "時々", "どうか")
TRIVIAL = (
    "typo", "typos", "spelling", "misspelled", "rename", "renamed", "bump", "reformat",
    "formatting", "prettier", "indentation", "whitespace", "sort the imports",
    "commented-out", "docstring", "changelog", "wording", "copyright", "display name",
    "alt text", "broken link", "image tag", "table of contents", "toc", "help text",
    "column header", "mechanical", "no functional change", "nothing functional",
    "cosmetic", "ortografía", "errata", "faute de frappe", "coquille", "tippfehler",
    "rechtschreibfehler", "erro de digitação", "constant", "deprecationwarning",
    "misspelling", "misspellings", "unsorted", "stray", "unused", "leftover", "dead code",
    "console.log", "debug print", "print statement", "grammar", "punctuation", "casing",
    "capitalization", "capitalisation", "capitalize", "capitalise", "lowercase", "uppercase",
    "gitignore", "logo", "favicon", "cli help", "doc fix", "docs fix", "docs only",
    "nothing calls it", "not used anywhere", "reorder", "swap the order",
    "社名", "会社名",
    "公司名",
    "错别字", "拼写", "笔误", "注释", "重命名", "改名", "缩进", "格式化", "版本号",
    "誤字", "脱字", "タイポ", "スペル", "コメント", "リネーム", "インデント", "名前を変更")
DANGER = ("prod", "production", "drops", "everywhere", "across", "all services",
          "db schema", "schema,", "migration that", "api responses")
# Moderate on their own; a capability (`FEATURES`) is moderate when the request builds it.
MODERATE = (
    "early stopping", "resumable", "duplicate", "metrics", "profiles", "hooks", "modules",
    "find it", "not sure why", "not sure if", "times out", "timeouterror",
    "upgrade", "broke", "broken again", "schema mapping", "backfill it", "subset of fields",
    "接口", "子命令", "缓存", "分页", "上传", "导入", "仪表盘", "限流",
    "エンドポイント", "サブコマンド", "キャッシュ", "ページネーション", "アップロード",
    "インポート", "ダッシュボード")
# Words that say the work itself is small (`quick one`, `a small thing`), not an aside.
SMALL = ("quick", "small", "tiny", "simple", "easy", "minor", "trivial", "one-liner", "little",
         "简单", "小改动", "簡単", "ちょっと")
SIMPLE = ("just", "quick", "only", "one call site", "line", "that's it",
          "thats it",
          "只需", "只要", "简单", "一行", "だけ", "簡単")

# Named large work on its own: the word alone says the blast radius is large.
COMPLEX = {
    "auth": ("oauth", "oauth2", "sso", "scim", "idp", "idps", "two-factor", "multi-factor",
             "saml", "oidc",
             "rbac", "2fa", "totp", "mfa", "row-level security",
             "session tokens", "permissions", "jwt", "jwts", "passkey", "passkeys", "webauthn",
             "single sign-on", "ldap", "单点登录", "シングルサインオン"),
    "data": ("pii", "gdpr", "encrypt", "encryption", "hard-delete", "purge", "purges",
             "retention", "delete all", "backfill", "uuid", "zero downtime", "data migration",
             "schema migration", "database migration", "personal data", "数据迁移", "データ移行",
             "個人情報", "个人信息"),
    "concurrency": ("double-sell", "double-charge", "double-charging", "double-charged",
                    "double-spend", "double-booking", "idempotency", "outbox", "saga",
                    "out of sync", "distributed transaction", "two-phase commit",
                    "eventual consistency", "race", "locking", "reservation", "clobber",
                    "idempotent",
                    "conflict resolution", "offline"),
    "security": ("secrets", "prod creds", "vault", "rotate", "path traversal", "pentest",
                 "pci", "card data", "card numbers", "cardholder",
                 "xss", "csrf", "security review",
                 "code signing", "signed images", "signed firmware", "signed updates",
                 "signed releases", "signature verification", "secure boot", "over-the-air",
                 "ota", "automatic rollback", "auto-rollback", "bcrypt", "argon2", "scrypt",
                 "pbkdf2",
                 "漏洞", "脆弱性"),
    "scale": ("multi-tenant", "tenant", "monolith", "all services", "across all",
              "every service", "microservices", "microservice", "own service", "legacy",
              "replace our", "homegrown", "in-house", "multi-region", "sharding",
              "feature store", "sync to async", "failover", "active-passive", "active-active",
              "second region", "disaster recovery", "high availability", "standby", "p99", "微服务",
              "单体", "マイクロサービス",
              "モノリス"),
}
# A system-wide concern: large work when the request changes it (below), not when it names it.
CONCERNS = {
    "auth": r"auth|authn|authz|authenticat\w*|autentica\w*|authentifi\w*|authori[sz]\w*"
            r"|log(?:in|on)s?|sign[- ]?(?:in|on)s?"
            r"|sessions?|passwords?|credentials?|identity|(?:access|refresh|bearer|api) tokens?"
            r"|roles?|acls?|access control|认证|鉴权|授权|登录|密码|权限|認証|認可|ログイン"
            r"|パスワード|権限",
    "crypto": r"hash(?:es|ed|ing)?|rehash\w*|encrypt\w*|decrypt\w*|crypto\w*|ciphers?"
              r"|certificates?|tls|ssl|salt(?:s|ed|ing)?|sha-?1|md5|加密|哈希|暗号化|ハッシュ",
    "money": r"payments?|payouts?|billing|invoic\w*|refunds?|charges?|subscriptions?|ledgers?"
             r"|monetar\w*"
             r"|currenc(?:y|ies)|money|pricing|prices|tax(?:es)?|stripe|braintree|adyen|paypal"
             r"|wallets?|balances?|支付|付款|计费|账单|退款|決済|支払|課金|請求|返金",
    "data": r"databases?|dbs?|schemas?|datastores?|tables|records|postgres\w*|mysql|mongo\w*"
            r"|sqlite|dynamo\w*|warehouse|storage|(?:user|customer|existing|production|prod)"
            r" data|data (?:model|layer|store|pipeline)s?|数据库|表结构|データベース|スキーマ",
    "services": r"services|microservices?|architecture|infrastructure|clusters?|kubernetes|k8s"
                r"|(?:own|separate|dedicated|standalone|independent) (?:\S+ )?service"
                r"|服务|架构|サービス|アーキテクチャ",
    "messaging": r"kafka|rabbitmq|nats|event bus|message (?:bus|broker)s?|pub/?sub",
    "interface": r"graphql|grpc|protobuf|soap|api (?:layer|contract|versions?)|public apis?"
                 r"|api versioning|versioned"
                 r"|rest(?:ful)? (?:api|endpoints)",
    "framework": r"frameworks?|orm|runtime|sdk|major version|框架|フレームワーク",
}
# A change to how something works, as opposed to an addition to it.
BIG_CHANGE = (
    r"rewrit\w*|rewrote|re-?implement\w*|rebuil(?:d|ds|t|ding)|replac(?:e|es|ed|ing)"
    r"|switch(?:es|ed|ing)?|migrat(?:e|es|ed|ing)|mov(?:e|es|ed|ing)|convert\w*"
    r"|chang(?:e|es|ed|ing) (?:how|the way)|overhaul\w*|redesign\w*|re-?architect\w*"
    r"|rework\w*|revamp\w*|split(?:s|ting)?|extract\w*|break(?:s|ing)? (?:\S+ ){0,5}?"
    r"(?:out|apart|up)|carv(?:e|ing) out|spin(?:ning)? (?:off|out)|upgrad\w*|swap\w*"
    r"|transition\w*|adopt\w*|unif(?:y|ied|ying)|consolidat\w*|get(?:ting)? off|onto"
    r"|re-?platform\w*"
    r"|改成|改为|换成|替换|迁移|重写|重做|重建|重构|切换|拆分|升级|移行|置き?換え|書き直|作り直"
    r"|切り替え|分割"
    r"|アップグレード")
# A verb that alters a mechanism (`… the authentication scheme`), with `SYSTEM` below.
ALTER = r"chang\w*|refactor\w*|modif\w*|redo|updat\w*|rethink|rewir\w*|修改|更改|変更|改修"
SYSTEM = (r"system|scheme|pipeline|layer|provider|processor|processing|strategy|stack"
          r"|mechanism|engine|gateway|library|系统|方案|体系|流程|仕組み|基盤|方式")
SCOPE = (
    r"everywhere|throughout|system[- ]wide|codebase[- ]wide|app[- ]wide|org[- ]wide"
    r"|company[- ]wide|across (?:the )?(?:whole |entire )?(?:codebase|code ?base|apps?|repos?"
    r"|repositories|stack|platform|fleet|frontend|backend|monorepo|org|company|board|system)"
    r"|across (?:the )?(?:[\w-]+,? ){0,6}services|(?:all"
    r"|every)(?! over) (?:the )?(?:\d+ )?(?:[\w-]+ ){0,2}"
    r"(?:services?|endpoints?|models?|tables?|handlers?|routes?|apis?|repos?|modules?"
    r"|microservices?|clients?|callers?|call sites?|places?|pages?|screens?|collections?"
    r"|buckets?|topics?|indexe?s?|schemas?|databases?|jobs?|workers?|queues?|columns?|fields?)"
    r"|\d+ (?:micro)?services|dozens of (?:micro)?services"
    r"|(?:the )?(?:whole|entire) (?:api|app|application|codebase|system|platform|frontend"
    r"|project|repo|repository|monorepo|fleet"
    r"|backend|site|product|stack)|全局|所有服务|所有接口|所有模块|整个系统|整个项目|全サービス"
    r"|全体|すべてのサービス")
RISK = (r"in prod(?:uction)?|on prod(?:uction)?|(?:zero|no|without) downtime|downtime"
        r"|irreversibl\w*|data loss|without losing|migrat\w* (?:\S+ ){0,2}?existing"
        r"|existing (?:data|rows|records|users"
        r"|customers|accounts|clients|integrations|callers|consumers)"
        r"|keep(?:ing)? (?:\S+ ){0,3}?working|without breaking|(?:don't|do not|must not) break"
        r"|backwards?[- ]compatib\w*|live traffic"
        r"|all (?:users|customers"
        r"|accounts)|\d+(?:\.\d+)? ?[mb] rows|millions of rows|生产环境|本番")
DESTRUCTIVE = r"delet\w*|purg\w*|drop(?:s|ped|ping)?|wip(?:e|es|ed|ing)|truncat\w*|eras\w*"
# Surfaces a person looks at: a concern named on one (`the login page`) is usually local.
UI = (r"button|page|screen|modal|dialog|tooltip|label|icon|colou?r|css|layout|banner|toast"
      r"|sidebar|header|footer|form|field|menu|tab|placeholder|copy|text|message|box|input"
      r"|picker|dropdown|nav|navbar|画面|按钮"
      r"|页面|ボタン|メッセージ|文案|提示")

# A version jump: `3.2 -> 5.0`, `v5 → v6`, `upgrade postgres 11 to 16` (major when the first
# numbers differ; `from 3 to 5` alone is a value, not a version), or an upgrade to a named
# whole-number version (`upgrade from Rails 6 to Rails 7`, `move to Django 5`).
VERSION_JUMP = re.compile(
    r"\bv?(\d+)(?:\.\d+)*(?:\.x)?\s*(?:->|→)\s*v?(\d+)(?:\.\d+)*\b"
    r"|\b(?:upgrade|bump|migrate)\s+\S+\s+(?:from\s+)?v?(\d+)(?:\.\d+)*\s+to\s+v?(\d+)"
    # `upgrade the whole project from python 2.7 to 3.11`
    r"|\b(?:upgrad|migrat|port|mov|bump|switch)\w*\s+(?:\S+\s+){0,5}?from\s+[a-z][\w.+-]*\s+"
    r"v?(\d+)(?:\.\d+)*\s+to\s+(?:[a-z][\w.+-]*\s+)?v?(\d+)")
# Words that make a bare `2 -> 3` a version rather than a value (`replicaCount 2 -> 3`).
VERSIONED = r"upgrad\w*|bump\w*|migrat\w*|versions?|releases?|major|v\d+"
MAJOR_TARGET = re.compile(
    r"\b(?:upgrad|migrat|mov|switch|port)\w*(?: \S+){0,5}? to (?!v?\d)[a-z][\w.-]* v?(\d{1,2})"
    r"(?:\.0)?(?![\d.])|\bupgrad\w* [a-z][\w.-]* to v?(\d{1,2})(?:\.0)?(?![\d.])")
# A path ends before the punctuation that closes its sentence (`… at ~200 events/s)?` still
# asks a question).
PATH = re.compile(
    r"(?<!\S)\S*/\S*?(?=[?？.,;:!)]*(?:\s|$))|`[^`]*`|\b[\w-]+\.(?:py|js|jsx|ts|tsx|go|rs|rb|java|kt|swift|cs|cpp|php"
    r"|vue|ya?ml|json|toml|tf|sql|sh|html|css)\b")
VS = re.compile(r"\bvs\.?\b")
# Chinese characters and Japanese kana, written without spaces between words.
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]")
_WORD = re.compile(r"[^\W_](?:[\w'-]*[^\W_])?")
# Where one ask ends and the next begins: a new line or sentence, `;`, `then`, `also`, `and`.
_ASK_BREAK = re.compile(
    r"\n|;|；|。|\.\s+|!\s+|\band then\b|\bthen\b|\balso\b|\bplus\b|\band\b|\bas well as\b"
    r"|然后|并且|另外|顺便|同时|ついでに|それから|あと、|また、")
_QUOTED = re.compile(r"“[^”]*”|「[^」]*」|\"[^\"]*\"|(?<!\w)'[^']{1,60}'(?!\w)")
_EDGE_L, _EDGE_R = r"(?<![a-z0-9_])", r"(?![a-z0-9_])"


def unquote(text: str) -> str:
    """`text` without its quoted strings: what a request quotes is content (`change "登陆" to
    "登录"`), not the system it concerns."""
    return _QUOTED.sub(" ", text)


def normalise(text: str) -> str:
    """Lower case, spaces collapsed, paths and `code` blanked to `…` (they name things; their
    parts — `deploy/prod/…` — are not cues, but they are words of the request)."""
    lowered = " ".join((text or "").lower().split())
    return " ".join(PATH.sub(" … ", lowered).split()) if PATH.search(lowered) else lowered


def words(text: str) -> set[str]:
    """The distinct words outside Chinese and Japanese text."""
    return set(_WORD.findall(CJK.sub(" ", text)))


def word_count(text: str) -> int:
    """Distinct words, with Chinese and Japanese text at one word per two characters, and each
    blanked path or piece of code (`…`) one word."""
    return len(words(text)) + math.ceil(len(CJK.findall(text)) / 2) + text.count("…")


def asks(text: str) -> list[str]:
    """The separate asks of a request (`rewrite X and fix a typo` is two), each normalised;
    one item when there is only one."""
    pieces = [normalise(piece) for piece in _ASK_BREAK.split((text or "").lower())]
    return [piece for piece in pieces if piece.strip(" ,.:-—")]


def cues(text: str, found: set[str], vocabulary: Iterable[str]) -> list[str]:
    """Word-list entries present as whole words (`found`), or as whole phrases in `text`;
    Chinese and Japanese entries as substrings."""
    hits = []
    for entry in vocabulary:
        if CJK.search(entry):
            present = entry in text
        elif " " in entry or not entry.isalnum():
            present = _phrase(entry).search(text) is not None
        else:
            present = entry in found
        if present:
            hits.append(entry)
    return hits


def stems(text: str, pattern: str) -> list[str]:
    """The distinct forms of a stem pattern present in `text`, at word edges."""
    hits = _compiled(rf"{_EDGE_L}(?:{pattern}){_EDGE_R}").findall(text)
    return list(dict.fromkeys(" ".join(hit.split()[:4]) for hit in hits))


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    """A pattern compiled once: the vocabulary has more patterns than `re`'s own cache holds,
    which would otherwise recompile the largest of them on every request."""
    return re.compile(pattern)


@functools.cache
def _phrase(entry: str) -> re.Pattern[str]:
    """A word-list phrase as a pattern, whole at its edges, built once."""
    return re.compile(rf"(?<![a-z0-9]){re.escape(entry)}(?![a-z0-9])")
