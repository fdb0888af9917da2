"""Which language identifier tells a message's language (issue 56, item 2): accuracy, speed, load.

    pip install --target /tmp/langid-candidates py3langid lingua-language-detector gcld3
    PYTHONPATH=/tmp/langid-candidates nice -n 5 .venv/bin/python -m benchmarks.studies.language_id \\
        --out benchmark_results/language_id.json

(gcld3 builds from source: it needs `apt-get install protobuf-compiler libprotobuf-dev g++`.)

The messages: xSID's test messages in Italian, Dutch, Danish, Indonesian, Kazakh (Cyrillic) and
Serbian (Latin script), and the English validation messages (xSID ships no English test.md), read
with the project's reader (annotations stripped, exact repeats dropped), plus short messages: the
first 1, 2 and 3 words of each. Serbian, Croatian and Bosnian count as one answer (``sr``): xSID's
Serbian is written in the Latin script, which identifiers mostly call Croatian or Bosnian. Every
other answer is right only when it is the language's ISO 639-1 code (Malay for Indonesian and
Norwegian for Danish are wrong).

Each candidate runs in a fresh child process, one after the other: "load s" is importing the
package, building the detector and identifying one message (lazy models included); "RSS MB" what
the process grew by from before the import to after every message; "µs / message" the median of
``--runs`` passes over the full messages, one call a message, each pass's mean per message, in
wall time and in the process's CPU time (which other jobs on the cores disturb less).

Then the component built on the chosen package, ``LanguageIdentifier``, as a bot of each language
sees it: trained (it learns the share of each language in the training messages) on that
language's xSID ``valid.md`` (the English bot on SNIPS's ``train.md``), it identifies every
language's test messages, with the bot's languages weighed ``main_language_prior`` times (one row
per ``--priors`` value; the default, 5, was chosen on ``valid.md`` (``--split valid``), not on
the test messages).
"right" counts ``unknown`` as wrong; "others called the bot's" is the share of the other six
languages' messages given the bot's language.

Candidates: py3langid (all its languages; restricted to the ISO 639-1 codes of
``nlu_engine.contract.languages``; restricted to ``RESTRICTED``), lingua-language-detector (high
and low accuracy mode, all its languages and ``RESTRICTED``), gcld3 (all; it cannot be restricted).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import DATASETS, RESULTS

XSID = DATASETS / "xSID"
#: language -> the xSID file of its messages (English has no test.md)
FILES = {"it": "it/test.md", "nl": "nl/test.md", "da": "da/test.md", "id": "id/test.md",
         "kk": "kk/test.md", "sr": "sr/test.md", "en": "en/valid.md"}
#: answers counted as the same language
SAME = {"hr": "sr", "bs": "sr", "sh": "sr"}
#: a bot's plausible set of candidates: the xSID languages and the neighbours they are taken for
RESTRICTED = ("en", "de", "fr", "es", "pt", "it", "nl", "da", "sv", "nb", "id", "ms", "kk", "ru",
              "uk", "sr", "hr", "bs", "tr", "pl")
CANDIDATES = ("py3langid", "py3langid[table]", "py3langid[20]", "lingua[high]", "lingua[low]",
              "lingua[high,20]", "lingua[low,20]", "gcld3")
SHORT = (1, 2, 3)
#: the training data of each language's bot (the component's rows)
BOT_DATA = {**{language: XSID / language / "valid.md" for language in FILES if language != "en"},
            "en": DATASETS / "SNIPS" / "train.md"}
TARGET = 0.97


# --- the candidates (in the child process) --------------------------------------------------------
def py3langid_detector(restrict: str | None) -> Callable[[str], str]:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    from nlu_engine.contract.languages import LANGUAGES

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    if restrict:
        wanted = set(LANGUAGES) if restrict == "table" else {
            "no" if code == "nb" else code for code in RESTRICTED}
        identifier.set_languages(sorted(wanted & set(identifier.labels)))
    return lambda text: identifier.classify(text)[0]


def lingua_detector(options: set[str]) -> Callable[[str], str]:
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    if "20" in options:
        builder = LanguageDetectorBuilder.from_languages(*(
            Language.from_iso_code_639_1(IsoCode639_1.from_str(code)) for code in RESTRICTED))
    else:
        builder = LanguageDetectorBuilder.from_all_languages()
    if "low" in options:
        builder = builder.with_low_accuracy_mode()
    detector = builder.with_preloaded_language_models().build()

    def detect(text: str) -> str:
        found = detector.detect_language_of(text)
        return found.iso_code_639_1.name.lower() if found is not None else "unknown"

    return detect


#: gcld3's codes that are not ISO 639-1 (its ``-Latn`` codes are romanized text of the language)
GCLD3_CODES = {"iw": "he", "fil": "tl", "und": "unknown"}


def gcld3_detector() -> Callable[[str], str]:
    import gcld3

    identifier = gcld3.NNetLanguageIdentifier(min_num_bytes=0, max_num_bytes=1000)

    def detect(text: str) -> str:
        code = identifier.FindLanguage(text=text).language.split("-")[0]
        return GCLD3_CODES.get(code, code)

    return detect


def detector(name: str) -> Callable[[str], str]:
    package, _, options = name.partition("[")
    option_set = set(options.rstrip("]").split(",")) - {""}
    if package == "py3langid":
        return py3langid_detector(next(iter(option_set), None))
    if package == "lingua":
        return lingua_detector(option_set)
    return gcld3_detector()


def rss_mb() -> float:
    """The process's resident memory now, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(name: str, texts_file: Path, runs: int) -> dict[str, Any]:
    """One candidate's answers, load time, memory and time a message (run in its own process)."""
    import numpy  # noqa: F401  (the project imports it anyway: not the candidate's memory)

    sets: dict[str, dict[str, list[str]]] = json.loads(texts_file.read_text(encoding="utf-8"))
    before = rss_mb()
    start = time.perf_counter()
    detect = detector(name)
    detect(sets["full"]["en"][0])
    load = time.perf_counter() - start
    full = [text for texts in sets["full"].values() for text in texts]
    passes, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        for text in full:
            detect(text)
        passes.append((time.perf_counter() - start) / len(full))
        cpu.append((time.process_time() - start_cpu) / len(full))
    answers = {kind: {language: [detect(text) for text in texts]
                      for language, texts in by_language.items()}
               for kind, by_language in sets.items()}
    return {"name": name, "load_seconds": load, "rss_mb": rss_mb() - before,
            "us_per_message": 1e6 * statistics.median(passes),
            "cpu_us_per_message": 1e6 * statistics.median(cpu),
            "passes_us": [1e6 * p for p in passes], "answers": answers}


# --- the messages and the scores (in the parent) --------------------------------------------------
def message_sets(split: str = "test") -> dict[str, dict[str, list[str]]]:
    """``{"full": {language: texts}, "1w": ..., "2w": ..., "3w": ...}`` of xSID's ``split``
    (English: always ``valid.md``)."""
    import logging

    from nlu_engine.training_data import load_data

    logging.getLogger("nlu_engine").setLevel(logging.ERROR)  # the notice of dropped repeats
    full = {language: [m.text for m in load_data(XSID / path.replace("test", split)).messages]
            for language, path in FILES.items()}
    sets = {"full": full}
    for words in SHORT:
        sets[f"{words}w"] = {language: [" ".join(text.split()[:words]) for text in texts]
                             for language, texts in full.items()}
    return sets


def accuracy(answers: list[str], language: str) -> float:
    return sum(SAME.get(a, a) == language for a in answers) / len(answers)


def scores(result: dict[str, Any]) -> dict[str, Any]:
    """Accuracy per language and kind of message, the macro mean, and the commonest wrong answers."""
    answers = result["answers"]
    per_language = {language: accuracy(found, language)
                    for language, found in answers["full"].items()}
    short = {kind: statistics.mean(accuracy(found, language) for language, found in by.items())
             for kind, by in answers.items() if kind != "full"}
    wrong = {language: Counter(SAME.get(a, a) for a in found if SAME.get(a, a) != language)
             .most_common(2) for language, found in answers["full"].items()}
    return {"per_language": per_language, "mean": statistics.mean(per_language.values()),
            "short": short, "wrong": wrong}


def run_child(name: str, texts_file: Path, runs: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.studies.language_id", "--child", name,
               "--texts", str(texts_file), "--runs", str(runs)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"name": name, "error": last}
    return json.loads(done.stdout)


# --- the component, a bot of each language (in the parent) ----------------------------------------
def component_row(sets: dict[str, dict[str, list[str]]], prior: float, threshold: float,
                  runs: int) -> dict[str, Any]:
    """``LanguageIdentifier`` trained for each xSID language's bot, on every language's messages."""
    from nlu_engine.contract.message import Message
    from nlu_engine.featurizers.language_identifier import LanguageIdentifier
    from nlu_engine.training_data import load_data

    own: dict[str, dict[str, float]] = {}
    others: dict[str, list[float]] = {}
    timed: list[float] = []
    cpu: list[float] = []
    for bot in FILES:
        component = LanguageIdentifier(main_language_prior=prior, threshold=threshold)
        component.train(load_data(BOT_DATA[bot]))
        said = {kind: {language: [SAME.get(a.name, a.name) for a in map(component.identify, texts)]
                       for language, texts in by.items()} for kind, by in sets.items()}
        own[bot] = {kind: accuracy(said[kind][bot], bot) for kind in sets}
        own[bot]["unknown"] = accuracy(said["full"][bot], "unknown")
        own[bot]["unknown_1w"] = accuracy(said["1w"][bot], "unknown")
        others[bot] = [accuracy(found, bot) for language, found in said["full"].items()
                       if language != bot]
        if bot == "en":
            full = [text for texts in sets["full"].values() for text in texts]
            for _ in range(runs):
                messages = [Message(text=text) for text in full]
                start, start_cpu = time.perf_counter(), time.process_time()
                component.process(messages)
                timed.append((time.perf_counter() - start) / len(messages))
                cpu.append((time.process_time() - start_cpu) / len(messages))
    return {"prior": prior, "threshold": threshold, "own": own, "others": others,
            "us_per_message": 1e6 * statistics.median(timed),
            "cpu_us_per_message": 1e6 * statistics.median(cpu)}


def component_table(rows: list[dict[str, Any]]) -> str:
    languages = list(FILES)
    head = ["prior, threshold", *languages, "min", "unknown (mean: full / 1 word)",
            *(f"{w} word{'s' * (w > 1)}" for w in SHORT), "others called the bot's (mean / max)",
            "en bot: others called en", "µs / message (wall / CPU)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        own, others = row["own"], row["others"]
        cells = [f"{row['prior']:g}, {row['threshold']:g}",
                 *(percent(own[lang]["full"]) for lang in languages),
                 percent(min(own[lang]["full"] for lang in languages)),
                 f"{percent(statistics.mean(own[lang]['unknown'] for lang in languages))} / "
                 f"{percent(statistics.mean(own[lang]['unknown_1w'] for lang in languages))}",
                 *(percent(statistics.mean(own[lang][f"{w}w"] for lang in languages))
                   for w in SHORT),
                 f"{percent(statistics.mean(v for vs in others.values() for v in vs))} / "
                 f"{percent(max(v for vs in others.values() for v in vs))}",
                 percent(statistics.mean(others["en"])),
                 f"{row['us_per_message']:.0f} / {row['cpu_us_per_message']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- the tables -----------------------------------------------------------------------------------
def percent(value: float) -> str:
    return f"{100 * value:.1f}"


def main_table(results: list[dict[str, Any]]) -> str:
    languages = list(FILES)
    head = ["candidate", *languages, "mean", "min", *(f"{w} word{'s' * (w > 1)}" for w in SHORT),
            "µs / message (wall / CPU)", "load s", "RSS MB"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for result in results:
        if "error" in result:
            lines.append(f"| {result['name']} | " + " | ".join(["-"] * (len(head) - 2))
                         + f" | {result['error'][:80]} |")
            continue
        s = result["scores"]
        cells = [result["name"], *(percent(s["per_language"][lang]) for lang in languages),
                 percent(s["mean"]), percent(min(s["per_language"].values())),
                 *(percent(s["short"][f"{w}w"]) for w in SHORT),
                 f"{result['us_per_message']:.0f} / {result['cpu_us_per_message']:.0f}",
                 f"{result['load_seconds']:.2f}",
                 f"{result['rss_mb']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def wrong_table(results: list[dict[str, Any]]) -> str:
    languages = list(FILES)
    lines = ["| candidate | " + " | ".join(languages) + " |", "|" + "---|" * (len(languages) + 1)]
    for result in results:
        if "error" not in result:
            wrong = result["scores"]["wrong"]
            cells = [", ".join(f"{code} {n}" for code, n in wrong[lang]) or "-" for lang in languages]
            lines.append(f"| {result['name']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", nargs="+", choices=CANDIDATES, default=list(CANDIDATES))
    parser.add_argument("--runs", type=int, default=3, help="timed passes a candidate (median)")
    parser.add_argument("--priors", type=float, nargs="*", default=[1, 3, 5, 10],
                        help="the component's main_language_prior, one row each (none: skip it)")
    parser.add_argument("--threshold", type=float, default=0.2, help="the component's threshold")
    parser.add_argument("--split", choices=("test", "valid"), default="test",
                        help="xSID's messages to identify (valid: where the prior was chosen; "
                             "they are also the bots' training data)")
    parser.add_argument("--out", type=Path, default=RESULTS / "language_id.json")
    parser.add_argument("--child", choices=CANDIDATES, help=argparse.SUPPRESS)
    parser.add_argument("--texts", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.texts, args.runs)))
        return 0
    from nlu_engine.evaluation.benchmarking import cpu_model

    sets = message_sets(args.split)
    counts = {language: len(texts) for language, texts in sets["full"].items()}
    results = []
    with tempfile.TemporaryDirectory(prefix="language-id-") as tmp:
        texts_file = Path(tmp) / "texts.json"
        texts_file.write_text(json.dumps(sets, ensure_ascii=False), encoding="utf-8")
        for name in args.candidates:
            result = run_child(name, texts_file, args.runs)
            if "error" not in result:
                result["scores"] = scores(result)
            results.append(result)
            print(f"{name}: {result.get('error') or 'done'}", file=sys.stderr, flush=True)
    machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d")}
    print(f"Messages: {counts}; {machine['cpu']}, {machine['cores']} cores; median of {args.runs} "
          f"passes; target: {percent(TARGET)} % in every language, 100 µs a message.\n")
    print(main_table(results))
    print("\nThe commonest wrong answers, full messages (sr counts hr and bs):\n")
    print(wrong_table(results))
    component = [component_row(sets, prior, args.threshold, args.runs) for prior in args.priors]
    if component:
        print("\nLanguageIdentifier (py3langid), a bot of each language on each language's "
              "messages; right %, own language:\n")
        print(component_table(component))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for result in results:
        result.pop("answers", None)
    record = {"machine": machine, "split": args.split, "messages": counts, "runs": args.runs,
              "results": results, "component": component}
    args.out.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
