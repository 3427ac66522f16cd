"""A tiny report document written twice: ``report.md`` (images linked) and a self-contained
``report.html`` (images and videos base64-embedded, CSS inline), from the same list of blocks."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1180px;margin:24px auto;
padding:0 16px;color:#222;line-height:1.45}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
h3{font-size:1.05em;margin-top:1.2em}
table{border-collapse:collapse;font-size:.86em;margin:.6em 0}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child{text-align:left}
img,video{max-width:100%;border:1px solid #eee;margin:.4em 0}
.cap{color:#666;font-size:.85em;margin-top:0}code{background:#f4f4f4;padding:0 3px}
"""

MIME = {".png": "image/png", ".gif": "image/gif", ".mp4": "video/mp4", ".jpg": "image/jpeg"}


def fmt(v: Any, digits: int = 3) -> str:
    """Table cell text: None -> '-', floats to ``digits`` significant decimals, bools yes/no."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v != v:  # NaN
            return "-"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.4g}" if abs(v) >= 100 else f"{v:.{digits}g}"
    return str(v)


class Document:
    """Blocks: ("h", level, text) | ("p", text) | ("table", headers, rows) | ("img", path, caption)
    | ("video", path, caption). Paths are files inside the output directory."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.blocks: list[tuple] = []

    def h(self, text: str, level: int = 2) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        self.blocks.append(("table", list(headers), [list(r) for r in rows]))

    def img(self, path: Path, caption: str = "") -> None:
        self.blocks.append(("img", Path(path), caption))

    def video(self, path: Path, caption: str = "") -> None:
        self.blocks.append(("video", Path(path), caption))

    # ------------------------------------------------------------------ rendering
    def markdown(self, out_dir: Path) -> str:
        lines = [f"# {self.title}", ""]
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                lines += ["#" * b[1] + " " + b[2], ""]
            elif kind == "p":
                lines += [b[1], ""]
            elif kind == "table":
                headers, rows = b[1], b[2]
                lines.append("| " + " | ".join(headers) + " |")
                lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|")
                lines += ["| " + " | ".join(fmt(c) for c in r) + " |" for r in rows]
                lines.append("")
            elif kind in ("img", "video"):
                rel = _rel(b[1], out_dir)
                lines.append(f"![{b[2]}]({rel})" if kind == "img" or rel.endswith(".gif") else f"[{b[2]}]({rel})")
                if b[2]:
                    lines.append(f"*{b[2]}*")
                lines.append("")
        return "\n".join(lines)

    def html(self, embed_max_bytes: int = 8_000_000) -> str:
        out = ["<!doctype html><html><head><meta charset='utf-8'>", f"<title>{html.escape(self.title)}</title>",
               f"<style>{CSS}</style></head><body>", f"<h1>{html.escape(self.title)}</h1>"]
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                out.append(f"<h{b[1]}>{html.escape(b[2])}</h{b[1]}>")
            elif kind == "p":
                out.append(f"<p>{_inline(b[1])}</p>")
            elif kind == "table":
                out.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in b[1]) + "</tr>")
                out += ["<tr>" + "".join(f"<td>{html.escape(fmt(c))}</td>" for c in r) + "</tr>" for r in b[2]]
                out.append("</table>")
            elif kind in ("img", "video"):
                path, cap = b[1], b[2]
                if not path.is_file() or path.stat().st_size > embed_max_bytes:
                    out.append(f"<p class='cap'>({html.escape(path.name)} not embedded: missing or too large)</p>")
                    continue
                data = base64.b64encode(path.read_bytes()).decode("ascii")
                mime = MIME.get(path.suffix.lower(), "application/octet-stream")
                if mime.startswith("video/"):
                    out.append(f"<video controls loop src='data:{mime};base64,{data}'></video>")
                else:
                    out.append(f"<img alt='{html.escape(cap)}' src='data:{mime};base64,{data}'>")
                if cap:
                    out.append(f"<p class='cap'>{html.escape(cap)}</p>")
        out.append("</body></html>")
        return "\n".join(out)

    def write(self, out_dir: Path, stem: str = "report") -> tuple[Path, Path]:
        out_dir = Path(out_dir)
        md, ht = out_dir / f"{stem}.md", out_dir / f"{stem}.html"
        md.write_text(self.markdown(out_dir), encoding="utf-8")
        ht.write_text(self.html(), encoding="utf-8")
        return md, ht


def _rel(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(Path(base).resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _inline(text: str) -> str:
    """Escape, then render `code` spans (the only markdown the paragraphs use)."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))
