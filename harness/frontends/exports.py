"""Who handed in what: the names learning platforms give to the files and folders of an export, read without
running anything.  harness.frontends.submissions lays out the submissions from what this module reads.

A platform renames every file it exports, and a student's name is only part of the new name.  Cutting it at the
first "_" put `alice_smith_attempt.py` and `alice_jones_attempt.py` into one student `alice` (0 points for both), so
each platform's naming is read from the parts it puts around the name, never from inside it:

- Canvas, "Download Submissions": `NAME_[LATE_]USERID_ATTACHMENTID_ORIGINAL` (flat files; a file handed in again is
  given `-1`, `-2` before its extension).  NAME is the student's name as Canvas writes it (lowercase, no spaces,
  sometimes with "_"): everything before the two ids.
- Moodle, "Download all submissions": `Full Name_PARTICIPANTID_assignsubmission_PLUGIN_ORIGINAL` as flat files, or
  folders `Full Name_PARTICIPANTID_assignsubmission_file_/` ("download in folders"; online text comes in
  `..._assignsubmission_onlinetext_/`).
- Blackboard, "Assignment File Download": `ASSIGNMENT_USERNAME_attempt_YYYY-MM-DD-HH-MM-SS_ORIGINAL`, with a receipt
  `ASSIGNMENT_USERNAME_attempt_YYYY-MM-DD-HH-MM-SS.txt` per attempt (its line `Name: Full Name (USERNAME)` gives the
  username where the assignment's name itself holds "_"); every attempt is in the download.
- Gradescope, "Export Submissions": folders `submission_ID/` and `submission_metadata.yml`, which names each
  folder's submitters (`submission_ID:` / `:submitters:` / `- :name: ...`, `:sid:`, `:email:`; `:created_at:`).
- GitHub Classroom: repositories `ASSIGNMENT-USERNAME` (`gh classroom clone student-repos` puts them in a folder
  `ASSIGNMENT-submissions/`).
- Anything else: files named `STUDENT_SAME.py` for every student (`alice_attention.py`): the ending most of the
  class's code files share (or --target's file) is cut off; a student's other files (`alice_helpers.py`) join them,
  and numbered copies of that file (`alice_attention_v2.py`, `alice_attention (1).py`) are attempts, the highest
  number the latest.

Sources consulted for these layouts (December 2026): Canvas, github.com/mikewesthad/canvas-unzipper README
(`smithbob_340934_208490284_BobsWork.zip`) and github.com/TimHanneman/Canvas_submission_sort README (the LATE field,
the resubmission number before the extension); Moodle, a feedback-upload guide quoting "First
Last_participantId_assignsubmission_file_" and scripts that drop `*_onlinetext_` folders; Blackboard, a Python
unpacker documenting `<Assignment Name>_<StudentID>_attempt_<timestamp>_<submitted file name>`; Gradescope, a test
fixture of an export parser (`submission_single:` / `:submitters:` / `- :name:` / `:sid:` / `:email:`) and
gradescope-autograders.readthedocs.io (submission metadata); GitHub Classroom, the repository naming
`prefix-username` in GitHub's classroom documentation and discussions.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePath

CODE = (".py", ".ipynb")
CANVAS = re.compile(r"(?P<student>.+?)_(?P<late>LATE_)?(?P<user>\d+)_(?P<attachment>\d+)_(?P<file>.+)", re.S)
CANVAS_READING = re.compile(r"(?=_(?:LATE_)?(?P<user>\d+)_(?P<attachment>\d+)_(?P<file>.+))", re.S)  # overlapping
RESUBMITTED = re.compile(r"(?P<stem>.+)-(?P<n>\d+)(?P<ext>\.[^.]+)?")
MOODLE = re.compile(r"(?P<student>.+?)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<file>.*)", re.S)
MOODLE_SEPARATOR = re.compile(r"(?=_\d+_assignsubmission_[a-z]+_)")  # lookahead: overlapping ones count
BLACKBOARD = re.compile(r"(?P<head>.+?)_attempt_(?P<date>\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d)(?:_(?P<file>.+)|(?P<receipt>"
                        r"\.txt))", re.S)
RECEIPT_NAME = re.compile(r"^Name:[^\n(]*\((?P<user>[^)\n]+)\)", re.M)


@dataclass(frozen=True)
class Named:
    """What a platform's name says about one file: whose it is, its name as the student handed it in (what their
    own imports use), and which attempt it belongs to (`attempt`: larger is later; `label` says it to a person)."""
    student: str
    original: str
    platform: str = ""
    attempt: tuple = ()
    label: str = ""
    uid: str = ""  # the platform's id for the student: two "John Smith"s are two students


def is_code(name: str) -> bool:
    return PurePath(name).suffix.lower() in CODE


def safe_name(text: str) -> str:
    """A student's name as a file name for their report: no path separator, control character or leading dot."""
    text = re.sub(r"[/\\\x00-\x1f\x7f]", "_", text).strip()
    return text.lstrip(".") or "_"


def canvas_readings(name: str) -> list[tuple[str, str, str, str]]:
    """Every way Canvas's `NAME_[LATE_]USERID_ATTACHMENTID_ORIGINAL` reads `name`, first the one `canvas` takes:
    (student, user id, attachment id, original file name), overlapping ones included (`a_1_2_3_x.py` reads as a's
    with ids 1 and 2, and as a_1's with 2 and 3); a late file's `LATE_` is one reading with its ids, not two."""
    readings = {}
    for m in CANVAS_READING.finditer(name):
        if m.start() > 0 and m.start("user") not in readings:
            readings[m.start("user")] = (name[:m.start()], m["user"], m["attachment"], m["file"])
    return list(readings.values())


def _canvas_id(text: str) -> bool:
    """Whether `text` can be an id Canvas wrote: a database id in decimal, so never with a leading zero."""
    return not text.startswith("0")


def canvas_ambiguous(name: str) -> bool:
    """Whether Canvas's name could be read another way than `canvas` reads it (its first ids).  A Canvas name may
    hold "_" (smith_alice), and a student who may edit it can write a classmate's name and user id into it: red team
    8's `bob_1002_99999_` put its own file among Bob's (user 1002), who then had two classes to choose from and no
    grade, and so did `bob_1002_` (instructor trial 10: `bob_1002_1003_6001_attention.py`, its ids overlapping).  Such
    a file is nobody's (a file handed in as `2024_01_x.py` too: its row asks a person to look).  Only readings whose
    ids Canvas could have written count (`2024_01_x.py`'s `01` is none), and the file is read only when the one
    left is the first: ids of the student's own making can never choose another reading than Canvas's (a name with
    no such reading is not Canvas's, and is read as before)."""
    readings = canvas_readings(name)
    possible = [r for r in readings if _canvas_id(r[1]) and _canvas_id(r[2])]
    return bool(possible) and possible != readings[:1]


def canvas_ambiguity(name: str) -> str:
    """How a Canvas name that reads as more than one student's reads, for the person who decides whose it is."""
    possible = [r for r in canvas_readings(name) if _canvas_id(r[1]) and _canvas_id(r[2])]
    ways = "; or ".join(f"{s}'s (Canvas user {u}, attachment {a}), handed in as {f}" for s, u, a, f in possible)
    return (f"{ways}. Look in Canvas whose file it is, put it under the "
            "name it was handed in as into a folder named after that student (as the summary names them), and "
            "grade them again with --only NAME")


def canvas(name: str) -> Named | None:
    m = CANVAS.fullmatch(name)
    if not m or canvas_ambiguous(name):
        return None
    original, again = m["file"], 0
    r = RESUBMITTED.fullmatch(original)
    if r:  # Canvas's number for a file handed in again, put before the extension
        original, again = r["stem"] + (r["ext"] or ""), int(r["n"])
    label = ("late" if m["late"] else "") + (f"{', ' if m['late'] else ''}resubmission {again}" if again else "")
    return Named(m["student"], original, "Canvas", (again, int(m["attachment"])), label, m["user"])


def ambiguous(name: str) -> str:
    """The platform whose naming reads `name` as more than one student's, or ""."""
    return "Moodle" if moodle_ambiguous(name) else "Canvas" if canvas_ambiguous(name) else ""


def moodle_ambiguous(name: str) -> bool:
    """Whether Moodle's `_ID_assignsubmission_PLUGIN_` occurs more than once in `name`: then the name reads as more
    than one student's, since the full name before it and the file name after it are both the student's to type (a
    red team named itself `Bob Smith_42_assignsubmission_file_` and its folder was graded as Bob's, his own listed as
    an earlier submission).  Such a file or folder is nobody's: not graded, for a person to look."""
    return len(MOODLE_SEPARATOR.findall(name)) > 1


def moodle(name: str) -> Named | None:
    m = MOODLE.fullmatch(name)
    if not m or moodle_ambiguous(name):
        return None
    return Named(m["student"], m["file"], "Moodle" if m["plugin"] == "file" else f"Moodle {m['plugin']}",
                 uid=m["id"])


def blackboard_user(receipt: str) -> str:
    """The username a Blackboard receipt names (`Name: Alice Smith (asmith)`), or ""."""
    m = RECEIPT_NAME.search(receipt)
    return m["user"].strip() if m else ""


def blackboard(names: list[str], receipts: dict[str, str]) -> dict[str, Named]:
    """Blackboard's files of one download.  `receipts`: the text of each receipt (`..._attempt_DATE.txt`) by name.
    The head of a name is `ASSIGNMENT_USERNAME`: the username from the attempt's receipt, else what follows the
    prefix every head shares (the assignment), else what follows the head's last "_" (an assignment's name holds
    "_" more often than a username does)."""
    matched = {n: m for n in names if (m := BLACKBOARD.fullmatch(n))}
    users = {}
    for m in matched.values():
        user = blackboard_user(receipts.get(f"{m['head']}_attempt_{m['date']}.txt", ""))
        if user and m["head"].endswith("_" + user):
            users[m["head"]] = user
    heads = sorted({m["head"] for m in matched.values()})
    common = _common_prefix(heads) if len(heads) > 1 else ""
    out = {}
    for n, m in matched.items():
        head = m["head"]
        user = users.get(head) or (head[len(common):] if common else head.rpartition("_")[2] or head)
        date = m["date"]
        label = f"attempt {date[:10]} {date[11:].replace('-', ':')}"
        out[n] = Named(user, m["file"] or "", "Blackboard receipt" if m["receipt"] else "Blackboard", (date,), label)
    return out


def _common_prefix(heads: list[str]) -> str:
    """The longest prefix ending with "_" that every head has and none is made of (the assignment's name)."""
    prefix = os.path.commonprefix(heads)
    prefix = prefix[:prefix.rfind("_") + 1]
    return prefix if all(len(h) > len(prefix) for h in heads) else ""


def generic(names: list[str], hint: str = "") -> tuple[dict[str, Named], list[str]]:
    """Files no platform's naming fits: `STUDENT_ENDING` where ENDING is --target's file (`hint`, its stem) or the
    ending most code files share; a file without it joins the student whose name it starts with, else its name up to
    its first "_" is the student (a file with no "_" is a student of its own: carol.py).  Returns the names read
    and those that give no student."""
    stems = {n: PurePath(n).stem for n in names}
    code = [n for n in names if is_code(n)]
    tail = shared_ending([stems[n] for n in code], hint)
    named: dict[str, Named] = {}
    for n in names:
        s = stems[n]
        if tail and s.lower().endswith(tail.lower()) and len(s) > len(tail):
            named[n] = Named(s[:-len(tail)], n[len(s) - len(tail) + 1:])
    known = sorted({v.student for v in named.values()}, key=len, reverse=True)
    unnamed = []
    for n in sorted(set(names) - set(named), key=lambda n: (not is_code(n), n)):  # code first: it makes students
        owner = next((k for k in known if n.startswith(k + "_") and len(n) > len(k) + 1), "")
        if owner:
            named[n] = Named(owner, n[len(owner) + 1:])
            continue
        head, sep, rest = n.partition("_")
        student = PurePath(head).stem if not sep else head
        if not student or (not is_code(n) and not sep):  # _x.py, README.txt: nobody's
            unnamed.append(n)
            continue
        named[n] = Named(student, rest if sep and rest else n)
        if student not in known:
            known.append(student)
            known.sort(key=len, reverse=True)
    return {n: _numbered(v, hint or tail[1:]) for n, v in named.items()}, unnamed


def _numbered(named: Named, base: str) -> Named:
    """`attention_v2.py`, `attention-2.py`, `attention (1).py`, `attention_attempt3.py`: the student's numbered
    attempts at the file every student hands in (`base`: --target's or the class's shared one), the highest the
    latest; any other file keeps its name (utils1.py and utils2.py are two helpers)."""
    if not base:
        return named
    path = PurePath(named.original)
    m = re.fullmatch(re.escape(base) + r"(?:[ _-]?(?:v|attempt|try)?[ _-]?\(?(\d+)\)?)?", path.stem, re.I)
    if not m:
        return named
    n = int(m[1] or 0)
    return Named(named.student, base + path.suffix, attempt=(n,), label=f"attempt {n}" if n else "unnumbered")


def shared_ending(stems: list[str], hint: str) -> str:
    """The ending `_X` most of the stems share (at least two), the shortest among equals; --target's stem first."""
    if hint and any(s.lower().endswith("_" + hint.lower()) for s in stems):
        return "_" + hint
    counts = Counter(t for s in stems for t in {s[i:] for i, c in enumerate(s) if c == "_" and i > 0})
    best = [(n, -len(t), t) for t, n in counts.items() if n >= 2]
    return max(best)[2] if best else ""


def latest(items: list[tuple[str, Named]]) -> tuple[list[tuple[str, Named]], list[tuple[str, Named]]]:
    """One student's files: those of their latest attempt, and the others.  Canvas numbers each file handed in again
    (the latest of each original name is kept: the download holds one submission); Blackboard dates every attempt
    (the files of the latest date are kept)."""
    if any(n.platform.startswith("Blackboard") for _, n in items):
        last = max(n.attempt for _, n in items)
        return [i for i in items if i[1].attempt == last], [i for i in items if i[1].attempt != last]
    keep: dict[str, tuple[str, Named]] = {}
    older = []
    for item in sorted(items, key=lambda i: i[1].attempt):
        previous = keep.get(item[1].original.lower())
        if previous is not None:
            older.append(previous)
        keep[item[1].original.lower()] = item
    return sorted(keep.values()), sorted(older)


def gradescope_sids(metadata: str) -> dict[str, str]:
    """Each folder's submitters' sids (a group's joined with " & ", as its names): the id a gradebook matches a row
    by.  A student types their name, and "Alice Smith (1004)" beside Alice Smith (sid 1004) was read as hers while
    every Gradescope row's student_id was empty (red team 13)."""
    sids: dict[str, list[str]] = {}
    current = None
    for line in metadata.splitlines():
        top = re.fullmatch(r"(submission_\d+):\s*", line)
        if top:
            current = sids.setdefault(top[1], [])
        elif current is not None and (field := re.fullmatch(r"\s*-?\s*:sid:\s*(.*?)\s*", line)):
            current.append(field[1].strip("'\""))
    return {f: " & ".join(v) if any(v) else "" for f, v in sids.items()}


def gradescope(metadata: str) -> dict[str, tuple[str, str]]:
    """`submission_metadata.yml` of a Gradescope export, read line by line (no YAML library, nothing evaluated):
    each folder's submitters' names (a group's joined with " & ", told apart by their sid when two are the same)
    and the submission's :created_at:."""
    folders: dict[str, dict] = {}
    current = None
    for line in metadata.splitlines():
        top = re.fullmatch(r"(submission_\d+):\s*", line)
        if top:
            current = folders.setdefault(top[1], {"names": [], "sids": [], "created": ""})
            continue
        if current is None:
            continue
        field = re.fullmatch(r"\s*-?\s*:(name|sid|created_at):\s*(.*?)\s*", line)
        if field:
            value = field[2].strip("'\"")
            if field[1] == "name":
                current["names"].append(value)
            elif field[1] == "sid":
                current["sids"].append(value)
            elif not current["created"]:
                current["created"] = value
    # told apart as file names: a name students type themselves (".Bob Smith", "Bob/Smith") must not become a
    # classmate's once made safe, or one student's submission is graded as the other's
    names = {f: safe_name(" & ".join(v["names"])) for f, v in folders.items() if v["names"]}
    twice = {n for n, k in Counter(names.values()).items() if k > 1}
    who = {f: (names[f], tuple(folders[f]["sids"]) or f) for f in names}  # one student's folders share who they are
    for f in names:
        if names[f] in twice:
            names[f] = safe_name(f"{names[f]} ({', '.join(folders[f]['sids']) or f})")
    names = distinct(names, who, {f: min(g for g in names if who[g] == who[f]) for f in names})
    return {f: (n, folders[f]["created"]) for f, n in names.items()}


def distinct(names: dict, who: dict, tags: dict) -> dict:
    """`names` (key -> a row's name) with no name left to two students: a name told apart by an id can still be a
    name another student typed (red team 8: two Bob Smiths became "Bob Smith (1)" and "Bob Smith (2)", and a third
    student named "Bob Smith (2)" had his later submission graded as the second Bob's, whose own was not graded).
    While students (`who`: keys of one student share it) share a name, each of them is told apart once more by its
    `tag` (one per student, never two students'), so that equal rows are never two people.  Each round lengthens every
    name it changes, and a name met again needs a student who typed it: at most one round per student."""
    names = dict(names)
    for _ in range(len(names) + 1):
        holders: dict[str, set] = {}
        for k, n in names.items():
            holders.setdefault(n, set()).add(who[k])
        shared = {n for n, h in holders.items() if len(h) > 1}
        if not shared:
            return names
        for k in names:
            if names[k] in shared:
                names[k] = safe_name(f"{names[k]} ({tags[k]})")
    raise AssertionError("names still shared after a round per student")  # unreachable: tags are one per student


def classroom_prefix(root_name: str, folders: list[str], repositories: bool) -> str:
    """GitHub Classroom's `ASSIGNMENT-` before each username, cut off when the folder is `ASSIGNMENT-submissions` or
    every folder is a git repository sharing it (never on a guess from two names alone)."""
    if root_name.endswith("-submissions"):
        prefix = root_name[:-len("submissions")]
        if folders and all(f.startswith(prefix) and len(f) > len(prefix) for f in folders):
            return prefix
    if repositories and len(folders) > 1:
        common = os.path.commonprefix(folders)
        prefix = common[:common.rfind("-") + 1]
        if prefix and all(len(f) > len(prefix) for f in folders):
            return prefix
    return ""


def told_apart(pairs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Each (name, platform id) as a row's name: the name alone, or with the id when two ids share the name (two
    students called John Smith in one course)."""
    ids: dict[str, set[str]] = {}
    for name, uid in pairs:
        ids.setdefault(name, set()).add(uid)
    told = {(name, uid): name if len(ids[name]) == 1 else safe_name(f"{name} ({uid})") for name, uid in pairs}
    # a name another student typed ("Bob Smith (43)" beside two Bob Smiths) is told apart again (distinct); a
    # student's tag is their id, numbered where one id came with two names (never two students' tag)
    keys = sorted(told)
    uses = Counter(uid for _, uid in keys)
    tags = {k: k[1] if uses[k[1]] == 1 else f"{k[1]}-{keys.index(k)}" for k in keys}
    return distinct(told, {k: k for k in told}, tags)
