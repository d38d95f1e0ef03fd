"""Cues of the complexity classifier (`complexity`) in the shape of a phrase rather than a
word: a value set to another (`from 60 to 30`), a capability being built (`add pagination`),
a choice to make (`which queue fits us best`). Fresh wording names the same kinds of work with
other words, so these families are stems and word orders, not the phrases of any one request;
the word lists and the text helpers are in `complexity_cues`.
"""

from __future__ import annotations

from clavain.sprint.complexity_cues import CJK, CONCERNS, UI, stems, unquote

# An open question in a shape rather than a word: a choice to make (`which queue fits us
# best`), a design to settle (`how failover should work`), a failure nobody can reproduce.
RESEARCH_FORMS = (
    r"which (?:\S+ ){0,5}?(?:fits|suits|is (?:best|better|right)|best|should we|to (?:use|pick"
    r"|choose|adopt))|how (?:\S+ ){1,5}?should (?:work|look|behave|be (?:done|structured))"
    r"|(?:nobody|no one|never|not|n't|unable to) (?:\S+ ){0,4}?(?:reproduc\w*|repro)"
    r"|what(?:'s| is) (?:going on|happening|wrong)|root[- ]cause (?:analysis|it)"
    r"|(?:want to|need to|help me) understand|understand (?:how|why|what|where)|is it worth"
    r"|no code yet|sketch(?: out)? (?:a|an|the|how)"
    r"|pros,? (?:and |& )?cons|is (?:that|it|this) (?:a )?(?:good|bad) idea"
    r"|(?:root )?cause (?:is )?unknown|unknown cause|options and risks"
    r"|every (?:few|couple of|\d+) (?:minutes|hours|days)"
    r"|(?:\w+|\d+) times (?:a|this|per|last) (?:day|week|month)|find the pattern"
    r"|before (?:we|anyone|you) (?:\S+ )?(?:touch|write|change|fix)|would (?:it|this|that) work"
    r"|how (?:do|are|did) (?:other|others|most|big) |tell (?:me|us) (?:where|what|why|how|which"
    r"|if|whether)|estimate (?:the|how)|how much (?:effort|work)|what would it take"
    r"|^[^?]{0,80}\b\w+ or \w+\b[^?]{0,60}\?"
    r"|what (?:are|were) (?:our |the |my |some |your )?(?:options|choices|alternatives)"
    r"|what options (?:do|are|have)|(?:want|need|looking for|give me|some) (?:\S+ ){0,2}?ideas"
    r"|ideas (?:first|only)|(?:don't|do not|dont) (?:change|touch|implement|fix) anything"
    r"|(?:nobody|no one|none of us) (?:\S+ ){0,3}?(?:figured out|knows?|understands?|can explain)"
    r"|every other (?:run|time|build|deploy\w*|day|request|call)")
# After an open question, the fix asked for (`find out why and fix it`): a defect whose cause
# must be found is moderate work, not research.
FIX_AFTER = (r"(?:(?:and|then|&|\+) |(?<=, ))(?:\S+ ){0,2}?(?:fix|patch|repair|resolve)(?:e?s)?"
             r" (?:it|them|this|that|the (?:\S+ )?(?:bug|issue|problem|test))"
             r"|(?:and|then) (?:get|have) (?:it|them|this) fixed")
# A mechanical edit in a shape rather than a word: one value set to another (`from 60 to 30`,
# `set MAX_UPLOAD_MB to 25`, `2 -> 3`), stale text (`still says`, `should say`), a link, a
# colour, a single line or string.
TRIVIAL_FORMS = (
    r"(?:chang|set|bump|increas|rais|lower|reduc|decreas|updat|adjust|mov|switch|turn|edit)\w*"
    r" (?:\S+ ){0,6}?(?:from \S+ to v?\d[\w.%-]*|from (?=[\"'‘“])\S+ to (?=[\"'‘“]))"
    r"|(?<![\d.])\d+[a-z%]{0,3} ?(?:->|→) ?\d+[a-z%]{0,3}(?![\d.])"
    r"|(?:set|chang|updat|increas|rais|lower|reduc|decreas|pin)\w* (?:\S+ ){0,6}?to v?\d[\w.%-]*"
    r"(?: ?(?:seconds|secs?|ms|minutes|mins?|hours?|days?|[kmg]b|%))?(?=$|[ ,.;)])"
    r"|(?:set|flip|toggle|switch|turn|chang|updat|default)\w* (?:\S+ ){0,5}?(?:to|=) (?:true"
    r"|false|on|off|none|null|…|(?=[\"'‘“]))"
    r"|(?:set|chang|updat|bump|increas|lower|rais|reduc|flip)\w* (?:\S+ ){0,3}?\w+ ?= ?(?:\d\S*"
    r"|true|false|on|off|none|null)"
    r"|from (?:info|debug|warn\w*|error|trace|true|false|on|off|yes|no) to"
    r"|[\"'‘“][^\"'’”]{1,40}[\"'’”] ?(?:->|→)|old (?:domain|url|address|link|e-?mail|name|logo"
    r"|wording|copy|brand\w*)"
    r"|still (?:says?|lists?|shows?|mentions?|reads?|refers? to|references?|points? (?:to|at)"
    r"|links? to|has the old)"
    r"|(?:should|so it|to) (?:say|says|read|reads)|points? (?:to|at) the old"
    r"|(?:fix|updat|correct|chang|repoint)\w* (?:the |a |this |that )?(?:\S+ )?links?"
    r"|(?:dead|stale|outdated) links?|links? (?:\S+ ){0,8}?(?:is|are) (?:dead|broken|outdated)"
    r"|(?:updat|chang|fix|bump)\w* (?:the )?(?:copyright |footer )?year"
    r"|(?:should be|make|turn|chang\w*|to) (?:\S+ ){0,3}?(?:red|blue|green|yellow|orange|purple"
    r"|pink|gr[ae]y|black|white)|(?:one|single) (?:\S+ )?(?:line|string)"
    r"|(?:should (?:be|say|read)|says?|reads?|it's|to say|wants?) (?=[\"'‘“])|says? (?=\d)"
    r"|should point (?:to|at)"
    r"|(?:it's|it is|should be|should say) (?:\S+ ){0,4}?not(?= )"
    r"|make (?:it|this|that|them)(?= [\"'‘“…]| \S*\d)|(?:rm|remov\w*|delet\w*|drop) (?:the )?(?:old"
    r"|unused|stale|dead|obsolete|orphan\w*) (?:\S+ )?(?:…|imports?|files?|scripts?|comments?"
    r"|flags?|alias\w*|links?|var\w*|functions?|css|assets?|images?|tests?|entr(?:y|ies)|lines?)"
    r"(?![a-z])|(?:改成|改为|换成|に変更)\s?[“\"「]"
    r"|(?:hide|remove|delete|drop)\w* (?:the |a |an )?(?:\S+ ){0,2}?(?:label|badge|icon|banner"
    r"|entry"
    r"|item|link|tooltip|emoji)s?(?![a-z])|(?:fix|correct)\w* (?:the )?(?:\S+ ){0,2}?(?:translation"
    r"|label|wording|text|copy|string|message|title|spelling|caption)s?(?![a-z])"
    r"|[“\"'][^”\"']{1,20}[”\"'] ?(?:统一)?(?:改成|改为|换成|替换为|に変更|に置き換え)"
    r"|链接|邮箱地址|年份|リンク|文言|表記"
    # A code comment, not a comment box or comment feature (`the keyboard covers the comment
    # box`).
    r"|comment(?! ?(?:box|section|field|thread|form|input|button|count|list|moderation|page"
    r"|screen|view|widget|area|editor|system|feature|api|endpoint|s? ?(?:page|feed|tab)))"
    # Quoted text changed to other quoted text (`change 'Submit' to 'Send'`).
    r"|(?:chang|renam|replac|updat|edit|swap|turn)\w* (?:\S+ ){0,6}?[\"'‘“][^\"'’”]{1,40}[\"'’”]"
    r" (?:to|with|into|by|for) (?=[\"'‘“])"
    r"|(?:debería|deberia) (?:ser|decir) (?=[\"'‘“])|(?:devrait|doit) (?:être|dire) (?=[\"'‘“])"
    r"|missing (?:an?|the|one) (?:[a-z]|letter|char\w*|comma|period|full stop|space|apostrophe"
    r"|hyphen|dash|quote|accent)(?![\w'])|says? (?:\S+ ){1,2}?instead of"
    r"|(?:rm|remov\w*|delet\w*|drop) (?:the |one |that )?(?:duplicat\w*|extra|second|repeated)"
    r" (?:\S+ )?(?:log|print|call|line|import|entry|statement|comment)s?(?![a-z])"
    r"|从\s?\S.{0,40}?(?:改成|改为|换成)")
# Building something new (`add`, `implement`, `support` …, `a new …`): beside a mechanical
# edit it makes the request more than one; before a capability (`FEATURES`), moderate work.
BUILD = (r"add(?:s|ed|ing)?|allow(?:s|ing)?|implement\w*|build(?:s|ing)?|creat(?:e|es|ing)"
         r"|introduc\w*"
         r"|support(?:s|ing)?(?! (?:ticket|team|channel|request|case|staff|desk))"
         r"|enabl(?:e|es|ing)|expos(?:e|es|ing)|set(?:ting)? up|wir(?:e|es|ing)(?: up)?"
         r"|integrat\w*|hook(?:ing)? up|new|增加|添加|新增|加一个|加个|加上|实现|支持"
         r"|追加|実装|対応")
# Building a whole thing, not adding to one: with a spec of several parts, moderate.
CONSTRUCT = r"implement\w*|build(?:s|ing)?|creat(?:e|es|ing)|develop\w*|introduc\w*"
# Built anew, a thing of its own (`build an activity feed`, `a new feature`): moderate.
NEW_THINGS = (r"feeds?|integrations?|sync|invit\w*|history|features?|tools?|apis?"
              r"|export(?:s|ing)?|import(?:ing)?|upload(?:s|ing)?|commands?(?!-)|shells?")
# Built anew, a place (`add a changelog page`): more than the mechanical edit its name
# suggests, but a page alone is not moderate.
NEW_PLACES = r"pages?|screens?|views?|settings|dashboards?|portals?|flows?"
# A capability a person would recognise as a feature of its own, not a tweak.
FEATURES = (
    r"endpoints?|routes?|subcommands?|cach(?:e|es|ing)|paginat\w*|rate[- ]limit\w*"
    r"|i18n|l10n|locali[sz]\w*|translations?|dark mode|themes?|theming|websockets?"
    r"|stream(?:s|ing)?|feature flags?|real-?time|live (?:updates?|typing|cursors?|chat"
    r"|preview|collaboration)|chat|presence|typing indicators?|impersonat\w*"
    r"|notifications?|search(?:es|ing)?|bulk|batch (?:\S+ )?(?:actions?|operations?|edits?|jobs?)"
    r"|progress (?:bars?|indicators?)|nested comments|comment threads|replies|reactions"
    r"|mentions|bookmarks|favou?rites|digests?|newsletters?|reminders?|scheduled \w+"
    r"|(?:weekly|daily|monthly|nightly) (?:summar(?:y|ies)|digests?|reports?|e-?mails?)"
    r"|recurr\w*|(?:nightly|daily|weekly|hourly|periodic) (?:jobs?|tasks?|runs?)|uptime"
    r"|status page|alerts?|saved \w+|invit(?:e|es|ations?)|throttl\w*|lockouts?|per (?:ip|user"
    r"|account|tenant|key|plan)|quotas?|metering|usage[- ]based"
    r"|filter(?:s|ing)?|sorting|tags?|tagging|webhooks?|dashboards?|charts?|audit (?:log|trail)"
    r"\w*|(?:keyboard )?shortcuts?|undo|markdown|rich[- ]text|previews?|autosave"
    r"|drag[- ]and[- ]drop|onboarding|wizard|background (?:jobs?|tasks?)|cron jobs?|scheduler"
    r"|tracking|monitoring|telemetry|analytics|alerting|error reporting"
    r"|integration tests|openapi|swagger|soft[- ]delete|retr(?:y|ies) (?:\S+ )?(?:logic|backoff)"
    r"|retr(?:y|ies) with"
    r"|接口|子命令|缓存|分页|上传|导入|导出|通知|仪表盘|限流|功能|定时|機能|审计|監査|筛选|搜索|排序|フィルタ|検索|自动保存|自動保存|恢复|復元"
    r"|草稿|下書き|エンドポイント"
    r"|サブコマンド"
    r"|キャッシュ|ページネーション|アップロード|インポート|エクスポート|通知|ダッシュボード")
# A defect in something that exists: fixing it is not building a capability.
DEFECT = (r"off[- ]by[- ]one|is off by|never \w+s|even (?:when|if|though)|returns (?:an? )?\d{3}"
          r"|(?:does|is|are|do)(?:n't| not)|isnt|doesnt|wrong|incorrect\w*|instead of|bug"
          r"|drops|fails|crash(?:es|ing)|breaks|chokes|skips|hangs|loses|ignores|misses"
          r"|[45]\d\ds|fix(?:es|ed)?|points? (?:to|at) (?:the )?wrong"
          r"|(?:the |an? )?(?:existing|current) (?:\S+ )?(?:\S+ )?(?:endpoint|api|route|cache"
          r"|search|queue|worker|upload|import|export)s?")
# Moderate in any wording: performance work, concurrency, moving work off the request path,
# a defect whose cause must be found.
MODERATE_FORMS = (
    r"speed (?:\S+ )?up|profil(?:e|ing) (?:it|the)|optimi[sz]\w*|slow quer\w*|bottleneck\w*"
    r"|thread ?pools?|parallel\w*|concurren\w*|in parallel|async(?:hronous(?:ly)?)?"
    r"|(?:background|async|celery|queue|sidekiq|worker) (?:jobs?|tasks?|workers?)"
    r"|off the request path|out of the (?:\S+ )?request|(?:find|track|hunt) (?:down )?(?:the"
    r" )?(?:leak|cause|culprit|source)|(?:memory|connection) leak"
    r"|(?:let|allow|enabl)\w* (?:\S+ ){0,2}?(?:users?|customers?|admins?|people|members|teams?"
    r"|visitors|owners|editors|viewers)(?: to)? \w+|(?:users?|customers?|admins?|people|members"
    r"|teams?) (?:to )?(?:be able to|can|want to|need to|should be able to) \w+"
    r"|(?:users?|customers?|admins?|people|members|teams?) (?:need|want|asked for)s? (?:a|an)"
    r" (?:way|page|screen|view|place|option|setting|tool)"
    r"|port(?:s|ed|ing)? (?:\S+ ){0,5}?(?:from|to)(?= )|virtuali[sz]\w*|lazy[- ]load\w*"
    r"|infinite scroll"
    r"|\d+k (?:rows|items|records)|performan\w*"
    r"|flak(?:y|es|iness)|diagnos\w*|(?:make|get) (?:it|them|this|the \S+) (?:reliable|stable"
    r"|deterministic)|refactor\w* (?:the |our |this |that )?(?:\S+ ){0,2}?(?:module|package|class"
    r"|component|subsystem|layer)s?(?![a-z])"
    r"|(?:split|break|divid|separat|carv)\w* (?:\S+ ){0,6}?(?:up |out |apart )?into (?:\S+ ){0,3}?"
    r"(?:modules?|packages?|services?|files|classes|components|layers|interfaces?"
    r"|implementations?|plugins?|crates?|libraries|apps?)(?![a-z])"
    r"|(?:rewrit\w*|rewrote|re-?implement\w*|rebuil\w*|overhaul\w*|redesign\w*|rework\w*"
    r"|revamp\w*|restructur\w*|convert\w* (?:\S+ ){0,8}?into)(?! (?:the |this |that |an? )?"
    r"(?:\S+ )?(?:message|copy|text|paragraph|sentence|wording|title|heading|description|docs?"
    r"|readme|comment|docstring)s?(?![a-z]))")
# A deliverable asked for politely (`could you add …?`): its question mark asks for work.
POLITE_ASK = (r"(?:could|can|would|will) (?:you|we|u|someone) (?:please |pls |also |quickly )?"
              r"(?:add|fix|chang|make|implement|updat|remov|delet|writ|creat|build|set|renam"
              r"|bump|refactor|split|wire|hook|port|convert|replac|swap|wrap|expos|introduc)\w*")
# Concurrent work on one shared thing (`in parallel … some jobs write the same file`): a race
# to design against, large work; read only with a `CONCURRENT` cue.
SHARED_WRITE = (r"(?:writ\w*|wrote|updat\w*|modif\w*|touch\w*|edit\w*|appends?|append\w*"
                r"|increment\w*) (?:\S+ ){0,2}?(?:to |in |into |on )?(?:the )?same (?:\S+ )?"
                r"(?:files?|rows?|records?|tables?|resources?|accounts?|keys?|documents?"
                r"|objects?|state|memory|variables?|counters?|cache|director(?:y|ies)|folders?)")
CONCURRENT = (r"parallel\w*|concurren\w*|threads?|multi-?thread\w*|simultaneous\w*"
              r"|at the same time|at once|workers|processes")
# Named large work in a shape rather than a word: a job that must run exactly once.
COMPLEX_FORMS = (r"(?:exactly|at (?:most|least))[- ]once|distributed|two (?:boxes|nodes|pods"
                 r"|workers|instances|servers|machines)|never (?:\S+ ){0,2}?the same \w+"
                 r"|(?:process|run|charg|bill|sen[dt]|fir"
                 r"|deliver|execut|handl)\w* (?:\S+ ){0,3}?twice|duplicate (?:events|deliver\w*)")
# Building in a system-wide area (`implement password reset`) is at least moderate.
_CONCERNED = "|".join(CONCERNS.values())
# A part of the code a capability's name may qualify (`the upload client`): a place, not the
# capability itself.
_PART = (r"client|helper|function|method|handler|module|class|code|path|script|logic|util\w*"
         r"|step|config\w*|option|setting|count|limit|size|file ?names?|names?|format")


def builds(text: str, *, places: bool = False) -> list[str]:
    """A `BUILD` verb a few words before a capability, a new thing of its own or a system-wide
    concern (`add pagination`, `implement password reset`); with `places`, a new page too."""
    things = f"{FEATURES}|{NEW_THINGS}|{_CONCERNED}" + (f"|{NEW_PLACES}" if places else "")
    return stems(text, rf"(?:{BUILD}) (?:\S+ ){{0,3}}?(?:{things})")


def built(text: str) -> list[str]:
    """The capabilities the request builds (`add pagination`, `a new endpoint`): a `BUILD` verb
    a few words before a `FEATURES` noun, or both anywhere in Chinese or Japanese text; or a
    capability named by a request that reports no defect in an existing one (`paginate the
    orders list`, but not `the /health endpoint returns 200 even when redis is down`)."""
    hits = builds(text)
    if not hits and not stems(text, DEFECT):
        hits = stems(unquote(text), rf"(?:{FEATURES})(?! ?(?:{UI}|{_PART})(?![a-z]))")
    if CJK.search(text):
        verbs = [hit for hit in stems(text, BUILD) if CJK.search(hit)]
        nouns = [hit for hit in stems(text, rf"(?:{FEATURES})(?! ?(?:{UI}))") if CJK.search(hit)]
        hits += [f"{verbs[0]} {nouns[0]}"] if verbs and nouns else []
    return hits
