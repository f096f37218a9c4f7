#!/usr/bin/python3
"""The documentation site builds, and every page and image of it loads in Chromium.

Usage: docs_site.py ROOT BUILD_DIR

1. scripts/docs.sh BUILD_DIR/site (Debian's mkdocs, --strict: broken links between pages fail it);
2. every page of mkdocs.yml's nav was generated, and every local link, stylesheet, script and image
   of every generated page points at a file of the site (and a #fragment at an id of that page);
3. every page opened in headless Chromium (tests/browser/cdp.py) from file://: no <img> failed to
   load, an <h1>, every stylesheet applied, and no Markdown left unrendered (a list or table that
   came out as a paragraph, as Python-Markdown does with a list not preceded by a blank line);
4. a screenshot of the site's start page: BUILD_DIR/site-screenshot.png.

Exit status 0 when all holds, 1 with one line per problem otherwise.
"""

import html.parser
import struct
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "browser"))
from cdp import Browser, BrowserError  # noqa: E402


class Refs(html.parser.HTMLParser):
    """The ids of a page and the local URLs it refers to (a href, img/script src, link href)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.refs = set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        for key in ("href", "src"):
            if a.get(key) and tag in ("a", "img", "script", "link"):
                self.refs.append((tag, a[key]))


def parse(path):
    p = Refs()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def nav_pages(root):
    import yaml  # python3-yaml: a dependency of Debian's mkdocs
    cfg = yaml.safe_load((root / "mkdocs.yml").read_text())
    out = []

    def walk(items):
        for item in items:
            if isinstance(item, str):
                out.append(item)
            else:
                for v in item.values():
                    walk(v) if isinstance(v, list) else out.append(v)
    walk(cfg["nav"])
    return out


def static_checks(site, pages, problems):
    parsed = {p: parse(p) for p in pages}
    for page, refs in parsed.items():
        for tag, url in refs.refs:
            u = urllib.parse.urlsplit(url)
            if u.scheme or url.startswith("//"):
                if tag != "a":  # a stylesheet, script or image from the network: the site must be self-contained
                    problems.append(f"{page.name}: <{tag}> loads {url} from the network")
                continue
            target = page if not u.path else (page.parent / urllib.parse.unquote(u.path)).resolve()
            if u.path and (not target.exists() or site.resolve() not in (target, *target.parents)):
                problems.append(f"{page.name}: <{tag}> points at {url}, which is not a file of the site")
                continue
            if u.fragment and tag == "a" and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else parse(target).ids
                if urllib.parse.unquote(u.fragment) not in ids:
                    problems.append(f"{page.name}: link {url}: no id '{u.fragment}' in {target.name}")


# Evaluated in each page: what a reader would see go wrong.
PAGE_CHECK = r"""(() => {
  const unrendered = [];
  for (const p of document.querySelectorAll('main p, div[role=main] p, .col-md-9 p')) {
    const t = p.textContent;
    if (/\n\s*([-*+]|\d+\.)\s+\S/.test(t) || /\|\s*-{3,}\s*\|/.test(t)) unrendered.push(t.slice(0, 80));
  }
  const sheets = Array.from(document.querySelectorAll('link[rel=stylesheet]'));
  return {
    h1: document.querySelectorAll('h1').length,
    title: document.title,
    images: document.images.length,
    broken_sheets: sheets.filter(l => !l.sheet).map(l => l.getAttribute('href')),
    unrendered: unrendered,
    height: document.documentElement.scrollHeight,
  };
})()"""


def png_size(path):
    data = Path(path).read_bytes()[:24]
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    return struct.unpack(">II", data[16:24])


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: docs_site.py ROOT BUILD_DIR\n")
        return 2
    root, build = Path(argv[1]).resolve(), Path(argv[2]).resolve()
    site = build / "site"
    t0 = time.monotonic()
    r = subprocess.run([str(root / "scripts" / "docs.sh"), str(site)], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=600)
    if r.returncode != 0:
        print(r.stdout.rstrip())
        print(f"FAIL: scripts/docs.sh exited {r.returncode}")
        return 1
    t_build = time.monotonic() - t0

    problems = []
    expected = [site / (Path(md).with_suffix(".html")) for md in nav_pages(root)]
    for p in expected:
        if not p.is_file():
            problems.append(f"the nav's page {p.relative_to(site)} was not generated")
    pages = sorted(p for p in site.rglob("*.html") if p.name != "404.html")
    if not (site / "index.html").is_file():
        problems.append("no index.html")
    static_checks(site, pages, problems)

    images = 0
    shot = build / "site-screenshot.png"
    try:
        with Browser(timeout=60) as b:
            page = None
            for p in pages:
                url = p.as_uri()
                if page is None:
                    page = b.open(url)
                else:
                    page.navigate(url)
                name = p.relative_to(site)
                broken = page.broken_images()
                for src in broken:
                    problems.append(f"{name}: image did not load: {src}")
                info = page.eval(PAGE_CHECK)
                images += info["images"]
                if info["h1"] < 1:
                    problems.append(f"{name}: no <h1>")
                for href in info["broken_sheets"]:
                    problems.append(f"{name}: stylesheet {href} did not load")
                for text in info["unrendered"]:
                    problems.append(f"{name}: Markdown left unrendered in a paragraph: {text!r}")
            page.navigate((site / "index.html").as_uri())
            w, h = page.screenshot(str(shot), 1280, 800, full_page=True)
    except BrowserError as e:
        print(f"FAIL: {e}")
        return 1
    pw, ph = png_size(shot)
    if (pw, ph) != (w, h) or pw < 100 or ph < 100:
        problems.append(f"screenshot {shot}: {pw} x {ph} pixels, expected {w} x {h}")

    for line in problems:
        print(f"FAIL: {line}")
    print(f"docs site: {len(pages)} pages, {images} images, built in {t_build:.1f} s, checked in "
          f"{time.monotonic() - t0 - t_build:.1f} s; screenshot {shot} ({pw} x {ph})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
