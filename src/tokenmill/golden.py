"""Golden strings and fingerprints: freeze what a tokenizer makes of hard strings, check it never
changes under a trained model unnoticed; and check a tokenizer against a model's config.json.

A golden file is JSON lines: a header ``{"tokenmill_golden": 1, "fingerprint", "vocab_size",
"tokenizer", "strings"}``, then per string ``{"name", "text", "ids", "tokens", "offsets",
"decoded"}`` (or ``"error"`` for a string the tokenizer refuses). Strings are encoded with
:meth:`Tokenizer.encode` as a model would be fed (post-processor included, special tokens in the
text matched) and decoded with :meth:`Tokenizer.decode`.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tokenmill._io import atomic_write_text, read_lines
from tokenmill.errors import FormatError, InputError, TokenmillError
from tokenmill.evaluate import special_ids
from tokenmill.tokenizer import Tokenizer

FORMAT_VERSION = 1
FIELDS = ("ids", "tokens", "offsets", "decoded", "error")

_PYTHON = 'def mean(xs: list[float]) -> float:\n    """Average."""\n    return sum(xs) / len(xs)\n'
_C = "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n"
_JS = "const add = (a, b) => a + b;\nconsole.log(`sum: ${add(1, 2)}`); // 3\n"
_RUST = "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n" \
        "    println!(\"{:?}\", v);\n}\n"
_GO = "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"héllo\")\n}\n"

# (name, text): what tokenizers get wrong, group by group.
BUILTIN: list[tuple[str, str]] = [
    ("empty", ""),
    ("space/one", " "),
    ("space/run", "a" + " " * 16 + "b"),
    ("space/leading-trailing", "   leading and trailing   "),
    ("space/tabs", "col1\tcol2\t\tcol4"),
    ("space/tab-indent", "\t\tindented\n\t\t\tdeeper"),
    ("space/mixed", "a \t \t b  \t"),
    ("space/nbsp-ideographic", "a\u00a0b\u3000c\u2009d"),
    ("space/zero-width", "zero\u200bwidth\u200cjoin\u200dx\ufeffbom"),
    ("newline/lf", "line one\nline two\n"),
    ("newline/crlf", "line one\r\nline two\r\n"),
    ("newline/cr", "old mac\rline"),
    ("newline/blank-lines", "para one\n\n\npara two"),
    ("newline/unicode", "next\u0085line\u2028separator\u2029paragraph"),
    ("newline/vt-ff", "vertical\x0btab and form\x0cfeed"),
    ("newline/only", "\n\n\r\n"),
    ("emoji/simple", "I love it 😀👍🎉"),
    ("emoji/skin-tones", "👍🏻 👍🏼 👍🏽 👍🏾 👍🏿"),
    ("emoji/zwj-family", "family: 👨\u200d👩\u200d👧\u200d👦"),
    ("emoji/zwj-profession", "👩🏽\u200d💻 writes code, 🧑\u200d🚀 flies"),
    ("emoji/flags", "🇯🇵 🇫🇷 🏳️\u200d🌈 🏴\u200d☠️"),
    ("emoji/keycap-vs16", "1️⃣ ❤️ ☺︎ ©️"),
    ("emoji/repeated", "🙂" * 12),
    ("url/https", "https://example.com/path/to/page?q=tokens&lang=en#section-2"),
    ("url/idn", "http://例え.jp/パス?検索=はい"),
    ("url/ftp-port", "ftp://user:pa55@files.example.org:2121/pub/v1.2.3.tar.gz"),
    ("url/bare", "see www.tokenmill.dev/docs or github.com/org/repo/issues/123"),
    ("email/plain", "alice@example.com"),
    ("email/tagged", "first.last+news@sub.domain.co.uk, <bob_o'neil@example.org>"),
    ("email/unicode", "用户@例子.广告"),
    ("number/integers", "0 7 42 1234567890 00012 9999999999999999999"),
    ("number/decimals", "3.14159 -0.5 +2.75e-10 6.022E23 .5"),
    ("number/grouped", "1,234,567.89 vs 1.234.567,89 vs 1 234 567"),
    ("number/money-percent", "$1,000.00 €50 ¥300 £7.5 100% 0.1‰"),
    ("number/hex-bin", "0x1F 0b1010 0o777 #ff8800"),
    ("number/other-digits", "٠١٢٣٤٥٦٧٨٩ ०१२३४५६७८९ 一二三 ①②③ ½ ¾"),
    ("date/iso", "2024-02-29T23:59:60.123Z"),
    ("date/forms", "29/02/2024, 02-29-24, 29.2.2024, Feb 29th 2024, 2024年2月29日"),
    ("time/clock", "12:34:56 07:05 am 23h59"),
    ("phone", "+1 (555) 010-9999 ext. 42"),
    ("code/python", _PYTHON),
    ("code/c", _C),
    ("code/javascript", _JS),
    ("code/rust", _RUST),
    ("code/go", _GO),
    ("code/sql", "SELECT id, COUNT(*) FROM t WHERE name LIKE 'a%' GROUP BY id;"),
    ("code/html", '<div class="x">&amp; <b>bold</b></div>'),
    ("code/json", '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}'),
    ("code/shell", "for f in *.txt; do wc -l \"$f\" | awk '{print $1}'; done"),
    ("code/latex", r"\frac{a^2 + b^2}{\sqrt{c}} \leq \sum_{i=0}^{n} x_i"),
    ("code/long-identifier", "get_tokenizer_configuration_from_pretrained_model_name_or_path"),
    ("case/mixed", "UPPER lower Title MiXeD camelCase snake_case SCREAMING_CASE"),
    ("case/contractions", "I'm you're it's we'll they'd don't CAN'T"),
    ("script/english", "The quick brown fox jumps over the lazy dog."),
    ("script/german", "Größere Übungen für Straßenbahnfahrer, ẞ und ß."),
    ("script/french", "L'élève a déjà vu où ça s'est passé, naïf cœur."),
    ("script/spanish", "¿Dónde está el niño? ¡Mañana!"),
    ("script/turkish", "İstanbul'da ılık ışık; I ı İ i"),
    ("script/vietnamese", "Tiếng Việt có dấu: người, được, những."),
    ("script/yoruba", "Ẹ ku àárọ̀, ṣé dáadáa ni?"),
    ("script/russian", "Съешь же ещё этих мягких французских булок."),
    ("script/greek", "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία."),
    ("script/arabic", "مرحبا بالعالم، هذا اختبار."),
    ("script/hebrew", "שלום עולם, זו בדיקה."),
    ("script/bidi-mixed", "The word שלום means peace; السلام too."),
    ("script/hindi", "नमस्ते दुनिया, यह एक परीक्षण है।"),
    ("script/bengali", "আমি বাংলায় গান গাই।"),
    ("script/tamil", "வணக்கம் உலகம்."),
    ("script/thai", "สวัสดีชาวโลก นี่คือการทดสอบ"),
    ("script/burmese", "မင်္ဂလာပါ ကမ္ဘာလောက"),
    ("script/georgian", "გამარჯობა მსოფლიო"),
    ("script/armenian", "Բարեւ աշխարհ"),
    ("script/amharic", "ሰላም ለዓለም።"),
    ("script/chinese-simplified", "你好，世界！这是一个测试。"),
    ("script/chinese-traditional", "繁體中文的測試句子。"),
    ("script/japanese", "こんにちは世界、カタカナとひらがなと漢字。ｶﾀｶﾅ"),
    ("script/korean", "안녕하세요 세계, 테스트입니다."),
    ("script/mixed", "Hello 世界 مرحبا мир 🌍!"),
    ("unicode/compatibility", "ﬁnance ﬂour Ｆｕｌｌｗｉｄｔｈ ㎏ ℌ ⅷ ²"),
    ("unicode/combining", "e\u0301 vs é, A\u030a vs Å, n\u0303 vs ñ"),
    ("unicode/stacked-marks", "Z\u0334\u0327\u031ba\u0337l\u0338g\u0337o\u0336"),
    ("unicode/titlecase", "ǅemal ǈ ǋ"),
    ("unicode/controls", "nul\x00soh\x01esc\x1b[0mdel\x7f"),
    ("unicode/astral", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟘𝟙𝟚 𓀀 𠜎"),
    ("unicode/replacement", "bad \ufffd byte"),
    ("special/endoftext", "text<|endoftext|>more"),
    ("special/bert", "[CLS] one [SEP] two [SEP] [PAD] [UNK] [MASK]"),
    ("special/sentencepiece", "<s> </s> <unk> <pad>"),
    ("special/chat", "<|im_start|>user\nhi<|im_end|>"),
    ("repeat/letters", "a" * 64),
    ("repeat/punctuation", "!!!??? ... --- === *** ###"),
    ("repeat/word", "the " * 20),
]


# (what a golden file or a strings file that is not UTF-8 needs: neither is read with --errors)
_UTF8_ONLY = "golden strings are read as UTF-8 text only: save the file as UTF-8"


def read_strings(path: str | os.PathLike[str],
                 prefix: str = "user") -> list[tuple[str, str]]:
    """The user's strings for ``--strings FILE``: a ``.json`` list of strings, a ``.jsonl`` file
    (a JSON string, or an object with ``"text"`` and optional ``"name"``, per line) or a text
    file (one string per line, without its line end). A string without a name of its own is
    named ``PREFIX/N`` (N: its place in the list, or its line)."""
    p = Path(path)
    name = p.name
    if name.endswith(".json"):
        try:
            items = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"{p}: no such file") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise FormatError(f"{p}: not a JSON file ({e})") from None
        if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
            raise FormatError(f"{p}: expected a JSON list of strings")
        return [(f"{prefix}/{i + 1}", s) for i, s in enumerate(items)]
    out = []
    for number, line in enumerate(read_lines(p, remedy=_UTF8_ONLY), 1):
        if not name.endswith(".jsonl"):
            out.append((f"{prefix}/{number}", line))
            continue
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise FormatError(f"{p}:{number}: not JSON ({e.msg})") from None
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            out.append((str(item.get("name", f"{prefix}/{number}")), item["text"]))
        elif isinstance(item, str):
            out.append((f"{prefix}/{number}", item))
        else:
            raise FormatError(f'{p}:{number}: expected a JSON string or an object with "text"')
    return out


def record(tok: Tokenizer, name: str, text: str) -> dict[str, Any]:
    """What ``tok`` makes of ``text``: ids, tokens, offsets and the decoded text."""
    try:
        enc = tok.encode(text, allowed_special="all")
        decoded = tok.decode(enc.ids)
    except TokenmillError as e:
        return {"name": name, "text": text, "error": str(e)}
    return {"name": name, "text": text, "ids": enc.ids, "tokens": enc.tokens,
            "offsets": [list(o) for o in enc.offsets], "decoded": decoded}


def _line(item: dict[str, Any]) -> str:
    # Readable (not ASCII-escaped), but with the characters other tools take for line ends
    # escaped, so that every reader sees one record per line.
    text = json.dumps(item, ensure_ascii=False)
    for c in ("\u0085", "\u2028", "\u2029"):
        text = text.replace(c, f"\\u{ord(c):04x}")
    return text


def freeze(tok: Tokenizer, path: str | os.PathLike[str], *, source: str = "",
           strings: Iterable[tuple[str, str]] = BUILTIN) -> int:
    """Write the golden file of ``tok`` on ``strings`` to ``path`` (atomically); returns how
    many strings it holds."""
    records = [record(tok, name, text) for name, text in strings]
    names = [r["name"] for r in records]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise InputError(f"two golden strings are named {twice!r}")
    header = {"tokenmill_golden": FORMAT_VERSION, "fingerprint": tok.fingerprint(),
              "vocab_size": tok.get_vocab_size(), "tokenizer": source,
              "strings": len(records)}
    atomic_write_text(path, "\n".join(_line(x) for x in [header, *records]) + "\n")
    return len(records)


def read_golden(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, records) of a golden file, with errors naming the line."""
    p = Path(path)
    items: list[dict[str, Any]] = []
    for number, line in enumerate(read_lines(p, remedy=_UTF8_ONLY), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise FormatError(f"{p}:{number}: not JSON ({e.msg}); is this a golden file from "
                              "'tokenmill golden freeze'?") from None
        if not isinstance(item, dict):
            raise FormatError(f"{p}:{number}: expected a JSON object")
        if items and not (isinstance(item.get("name"), str) and isinstance(item.get("text"), str)):
            raise FormatError(f'{p}:{number}: a golden record needs "name" and "text" strings')
        if items and (problem := _record_problem(item)) is not None:
            raise FormatError(f"{p}:{number}: {problem}")
        items.append(item)
    if not items or items[0].get("tokenmill_golden") != FORMAT_VERSION:
        raise FormatError(f"{p}: not a tokenmill golden file (its first line must be the header "
                          f'with "tokenmill_golden": {FORMAT_VERSION})')
    if not isinstance(items[0].get("fingerprint"), str):
        raise FormatError(f'{p}:1: the header has no "fingerprint"')
    count = items[0].get("strings")
    if count != len(items) - 1:
        raise FormatError(f"{p}: holds {len(items) - 1} strings where its header says {count!r}; "
                          "a file cut short, or edited?")
    return items[0], items[1:]


def _record_problem(item: dict[str, Any]) -> str | None:
    """What is wrong with a golden record's fields, as ``record`` writes them (an error, or ids,
    tokens, offsets and the decoded text), or None."""
    if "error" in item:
        return None if isinstance(item["error"], str) else '"error" must be a string'
    checks = {
        "ids": lambda v: isinstance(v, list) and all(type(i) is int for i in v),
        "tokens": lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v),
        "offsets": lambda v: isinstance(v, list) and all(
            isinstance(o, list) and len(o) == 2 and all(type(i) is int for i in o) for o in v),
        "decoded": lambda v: isinstance(v, str),
    }
    shapes = {"ids": "a list of integers", "tokens": "a list of strings",
              "offsets": "a list of [start, end] pairs of integers", "decoded": "a string"}
    for key, valid in checks.items():
        if key not in item:
            return f'the record has no "{key}" (nor an "error")'
        if not valid(item[key]):
            return f'"{key}" must be {shapes[key]}'
    return None


def _short(values: Sequence[Any], limit: int = 8) -> str:
    shown = ", ".join(repr(v) if not isinstance(v, list) else f"{v[0]}:{v[1]}"
                      for v in values[:limit])
    return f"[{shown}{', ...' if len(values) > limit else ''}]"


def describe(expected: dict[str, Any], actual: dict[str, Any], context: int = 2) -> list[str]:
    """A readable diff of one string's record: for each field that changed, where the first
    differences start and what was expected there against what came out."""
    lines = []
    if "error" in expected or "error" in actual:
        return [f"    error: expected {expected.get('error', 'none')!r}, got "
                f"{actual.get('error', 'none')!r}"]
    for key in ("tokens", "ids", "offsets"):
        a, b = expected.get(key, []), actual[key]
        if a == b:
            continue
        matcher = difflib.SequenceMatcher(a=[json.dumps(x) for x in a],
                                          b=[json.dumps(x) for x in b], autojunk=False)
        changes = [op for op in matcher.get_opcodes() if op[0] != "equal"][:3]
        for _, i1, i2, j1, j2 in changes:
            lines.append(f"    {key} @{i1}: expected {_short(a[i1:i2])} "
                         f"got {_short(b[j1:j2])}")
    if expected.get("decoded") != actual["decoded"]:
        lines.append(f"    decoded: expected {expected.get('decoded')!r}")
        lines.append(f"             got      {actual['decoded']!r}")
    return lines


def check(tok: Tokenizer, path: str | os.PathLike[str], *, max_diffs: int = 5,
          ignore_fingerprint: bool = False, source: str = "") -> tuple[bool, list[str]]:
    """Re-encode the strings of a golden file: (no drift, report lines). A different
    fingerprint is reported first, and is drift unless ``ignore_fingerprint``; ``source``
    names the tokenizer being checked in that line."""
    header, records = read_golden(path)
    report = []
    fingerprint = tok.fingerprint()
    same_fingerprint = header["fingerprint"] == fingerprint
    if not same_fingerprint:
        frozen_from = f" ({header['tokenizer']})" if header.get("tokenizer") else ""
        report.append(f"fingerprint MISMATCH: {path} was frozen from tokenizer "
                      f"{header['fingerprint'][:16]}...{frozen_from}; this tokenizer"
                      f"{f' ({source})' if source else ''} is "
                      f"{fingerprint[:16]}... (vocab size {header.get('vocab_size')} then, "
                      f"{tok.get_vocab_size()} now): a different tokenizer, or a changed one")
    drifted = []
    for expected in records:
        actual = record(tok, expected["name"], expected["text"])
        if any(expected.get(k) != actual.get(k) for k in FIELDS):
            drifted.append((expected, actual))
    if drifted:
        report.append(f"drift in {len(drifted)} of {len(records)} strings; the first "
                      f"{min(max_diffs, len(drifted))}:")
        for expected, actual in drifted[:max_diffs]:
            report.append(f"  [{expected['name']}] {expected['text'][:60]!r}")
            report += describe(expected, actual)
    elif not same_fingerprint:
        report.append(f"all {len(records)} strings encode as frozen: the tokenizer differs "
                      "elsewhere (compare 'tokenmill inspect' of both)")
    ok = not drifted and (same_fingerprint or ignore_fingerprint)
    if ok:
        report.append(f"ok: {len(records)} strings as frozen, fingerprint "
                      f"{fingerprint[:16]}... {'matches' if same_fingerprint else 'ignored'}")
    return ok, report


# -- a model's config.json -------------------------------------------------------------------

CONFIG_TOKENS = ("bos", "eos", "pad", "unk")
# Names a tokenizer's special tokens go by, most specific first: what a token is taken to be
# when neither the command line nor a tokenizer_config.json beside the file says.
KNOWN_NAMES = {
    "bos": ("<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>", "[CLS]", "<|endoftext|>"),
    "eos": ("</s>", "<|end_of_text|>", "<eos>", "<|endoftext|>", "[SEP]"),
    "pad": ("<pad>", "[PAD]", "<|pad|>", "<|padding|>"),
    "unk": ("<unk>", "[UNK]", "<|unk|>"),
}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a JSON file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise FormatError(f"{path}: not a JSON file ({e})") from None


def _named_tokens(tok: Tokenizer, beside: Path | None,
                  given: dict[str, str | None]) -> dict[str, tuple[str, str]]:
    """kind -> (token, where that came from), for bos/eos/pad/unk."""
    out: dict[str, tuple[str, str]] = {}
    for kind, token in given.items():
        if token is not None:
            out[kind] = (token, "given")
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        data = _read_json(beside / name) if beside and (beside / name).is_file() else {}
        for kind in CONFIG_TOKENS:
            value = data.get(f"{kind}_token") if isinstance(data, dict) else None
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str) and kind not in out:
                out[kind] = (value, name)
    unk = getattr(tok.model, "unk_token", None)
    if unk and "unk" not in out:
        out["unk"] = (unk, "the model's unk_token")
    if tok.padding is not None and "pad" not in out:
        out["pad"] = (tok.padding.pad_token, "the padding setting")
    for kind, names in KNOWN_NAMES.items():
        found = next((n for n in names if tok.token_to_id(n) is not None), None)
        if kind not in out and found is not None:
            out[kind] = (found, "its name")
    return out


def check_config(tok: Tokenizer, config_path: str | os.PathLike[str], *,
                 tokenizer_path: str | os.PathLike[str] | None = None,
                 tokens: dict[str, str | None] | None = None) -> tuple[bool, list[str]]:
    """Compare the vocabulary size and the bos/eos/pad/unk ids of ``config.json`` with the
    tokenizer's: (no mismatch, report lines). A tokenizer may have fewer rows than the model
    (embeddings are often padded); not more."""
    p = Path(config_path)
    config = _read_json(p)
    if not isinstance(config, dict):
        raise FormatError(f"{p}: expected a JSON object (a model's config.json)")
    wanted = ["vocab_size", *(f"{k}_token_id" for k in CONFIG_TOKENS)]
    if not any(k in config for k in wanted) and isinstance(config.get("text_config"), dict):
        config = config["text_config"]  # multimodal models keep the language model's here
    if not any(k in config for k in wanted):
        raise InputError(f"{p}: none of {', '.join(wanted)} in it; is it a model's config.json?")
    beside = None
    if tokenizer_path is not None:
        t = Path(tokenizer_path)
        beside = t if t.is_dir() else t.parent
    named = _named_tokens(tok, beside, tokens or {})
    size = tok.get_vocab_size()
    rows = [("field", "config.json", "tokenizer", "status")]
    bad = unchecked = 0
    # Ids a model's config may rightly name: the special tokens, and the unknown token (Llama
    # and Mistral pad with <unk>, which a SentencePiece model keeps as a piece, not an added one)
    specials = {t.id for t in tok.added_tokens if t.special} | special_ids(tok)[0]
    if tok.padding is not None:
        specials.add(tok.padding.pad_id)
    vocab = config.get("vocab_size")
    if vocab is None:
        rows.append(("vocab_size", "(unset)", f"{size}", "-"))
    elif not isinstance(vocab, int) or isinstance(vocab, bool):
        raise FormatError(f"{p}: vocab_size must be an integer, got {vocab!r}")
    else:
        status = "ok" if vocab == size else \
            f"ok ({vocab - size} rows the tokenizer never emits)" if vocab > size else \
            f"MISMATCH: ids up to {size - 1} index past the model's {vocab} rows"
        bad += status.startswith("MISMATCH")
        rows.append(("vocab_size", str(vocab), str(size), status))
    for kind in CONFIG_TOKENS:
        key = f"{kind}_token_id"
        value = config.get(key)
        token, where = named.get(kind, (None, ""))
        token_id = tok.token_to_id(token) if token is not None else None
        mine = f"{token!r} = {token_id} (by {where})" if token_id is not None else \
            f"{token!r} is not in the vocabulary" if token is not None else "no such token"
        if value is None:
            rows.append((key, "(unset)", mine, "-"))
            continue
        ids = value if isinstance(value, list) else [value]
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise FormatError(f"{p}: {key} must be an integer or a list of integers, "
                              f"got {value!r}")
        outside = [i for i in ids if not 0 <= i < size]
        if outside:
            status = f"MISMATCH: id {outside[0]} is not an id of the tokenizer"
        elif token is not None and token_id is None:
            # (named, by the command line or a tokenizer_config.json, but not a token: the
            # model's id cannot be its id; "unchecked" said to give the very flag given)
            status = f"MISMATCH: {token!r} (by {where}) is not a token of the tokenizer"
        elif token_id is None and not all(i in specials for i in ids):
            # A model's special id that lands on an ordinary piece of text is a config bug
            # whatever the tokenizer calls its special tokens.
            plain = next(i for i in ids if i not in specials)
            status = (f"MISMATCH: id {plain} is {tok.id_to_token(plain)!r}, not a special "
                      "token of the tokenizer")
        elif token_id is None:
            unchecked += 1
            status = (f"unchecked: the tokenizer names no {kind} token (give --{kind}-token); "
                      f"id {ids[0]} is {tok.id_to_token(ids[0])!r}")
        elif token_id in ids:
            status = "ok"
        else:
            status = f"MISMATCH: id {ids[0]} is {tok.id_to_token(ids[0])!r} in the tokenizer"
        bad += status.startswith("MISMATCH")
        rows.append((key, json.dumps(value), mine, status))
    widths = [max(len(r[c]) for r in rows) for c in range(3)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3] for r in rows]
    more = f" ({unchecked} unchecked)" if unchecked else ""
    lines.append(f"{bad} mismatch{'es' if bad != 1 else ''}{more}" if bad else
                 f"ok: no mismatch{more}")
    return bad == 0, lines
