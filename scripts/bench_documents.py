"""How long reading a file a user sent takes (channels/documents.py), per
kind and size: the time before the model is asked, spent in a worker
thread. Files are built in memory (tests/fakes/files.py), best of N runs.
Then the memory a very large Word document, PowerPoint slide and
flat OpenDocument spreadsheet cost to read (each XML near the 64 MB
unpacked budget, or the 20 MB download limit), each in a fresh process:
the peak of Python's allocations (tracemalloc, which counts ElementTree's
and expat's) and the process's peak resident size.

    .venv/bin/python scripts/bench_documents.py
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from channels.documents import read_document  # noqa: E402
from datetime import date, timedelta  # noqa: E402

from tests.fakes.files import Slide, docx, ods, pdf, pptx, xlsx  # noqa: E402


def page(i: int) -> str:
    return "\n".join(f"Line {j} of page {i}: the quarterly revenue grew in region {j}." for j in range(35))


def sales(rows: int) -> list[list[str | int | float | date]]:
    """Rows of cells both fakes write (xlsx's Cell and ods's OdsCell)."""
    first = date(2026, 1, 1)
    header: list[str | int | float | date] = ["Date", "Region", "Product", "Units", "Price"]
    return [header] + [
        [first + timedelta(days=i % 365), f"Region {i % 7}", f"Product {i % 40}", i % 97, round(9.99 + i % 13, 2)]
        for i in range(rows)
    ]


CASES = [
    ("notes.md, 10 KB", "notes.md", ("- decided: ship on Friday, budget 40k\n" * 270).encode()),
    ("app.log, 1 MB", "app.log", ("2026-03-01 12:00:00 INFO worker 17 heartbeat ok\n" * 22000).encode()),
    ("会议纪要.txt, GB18030, 600 KB", "会议纪要.txt", ("会议纪要：周五发布，预算四万。\n" * 20000).encode("gb18030")),
    ("report.pdf, 30 pages", "report.pdf", pdf([page(i) for i in range(30)])),
    ("book.pdf, 300 pages (read to 500k characters)", "book.pdf", pdf([page(i) for i in range(300)])),
    ("minutes.docx, 2,000 paragraphs", "minutes.docx", docx([f"Paragraph {i}: we agreed to move the launch." for i in range(2000)])),
    ("sales.xlsx, 2 sheets of 5,000 rows x 5 (dates, numbers, strings)", "sales.xlsx",
     xlsx({"2026": sales(5000), "2025": sales(5000)})),
    ("sales.ods, the same 2 sheets as Calc writes them", "sales.ods",
     ods({"2026": sales(5000), "2025": sales(5000)})),
    ("sales.fods, the same as a flat file", "sales.fods", ods({"2026": sales(5000), "2025": sales(5000)}, flat=True)),
    ("deck.pptx, 60 slides with notes", "deck.pptx",
     pptx([Slide([f"Slide {i}: Q3 results", *[f"Point {j}: revenue grew in region {j}" for j in range(6)]],
                 notes=f"Say the numbers for slide {i} slowly.") for i in range(60)])),
]


# Read in a process of their own: (label, how to build the file).
LARGE = {
    "huge.docx, 59 MB document.xml (500,000 paragraphs)":
        lambda: docx([f"Paragraph {i}: we agreed to move the launch to Friday, budget 40k." for i in range(500_000)]),
    "huge.xlsx, 1,500,000 rows of distinct strings (a 57 MB sharedStrings.xml)":
        lambda: xlsx({"Notes": [[f"note {i}: call back"] for i in range(1_500_000)]}),
    "huge.pptx, one slide of 58 MB (a text box of 550,000 paragraphs)":
        lambda: pptx([Slide(["Everything", *(f"Point {i}: revenue grew in region {i % 7}, budget 40k."
                                             for i in range(550_000))])]),
}


def peak(label: str) -> None:
    """Read LARGE[label] and print its row: built before measuring."""
    data = LARGE[label]()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    start = time.perf_counter()
    doc = read_document(data, label.partition(",")[0], max_bytes=20 * 1024 * 1024, max_tokens=12_000)
    took = time.perf_counter() - start
    _, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"| {label} | {len(data):,} | {doc.total_chars:,} | {took * 1000:.0f} | {top / 2**20:.1f} |"
          f" {rss / 1024:.0f} (+{(rss - before) / 1024:.0f}) |")


def main() -> None:
    if sys.argv[1:2] == ["--peak"]:
        peak(sys.argv[2])
        return
    print("| file | bytes | characters | ms (best of 3) |\n|---|---|---|---|")
    for label, name, data in CASES:
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            doc = read_document(data, name, max_bytes=20 * 1024 * 1024, max_tokens=12_000)
            best = min(best, time.perf_counter() - start)
        print(f"| {label} | {len(data):,} | {doc.total_chars:,} | {best * 1000:.1f} |")
    print("\n| file | bytes | characters | ms | peak traced MB | peak RSS MB (+ reading) |\n|---|---|---|---|---|---|",
          flush=True)
    for label in LARGE:
        subprocess.run([sys.executable, __file__, "--peak", label], check=True)


if __name__ == "__main__":
    main()
