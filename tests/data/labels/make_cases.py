#!/usr/bin/env python3
"""Builds the hand-built mining test data (deterministic; rerun after editing a case):

  tests/data/labels/synthetic/   a dataset of synthetic trajectory pairs, 5+ per
                                 failure-mode category, each with a known answer
  tests/data/labels/synthetic.jsonl  their labels (category + note per case)
  tests/data/mine18/             the 18-task balance set: 3 categories x 6 tasks over
                                 6 domains, one known divergence each
  tests/data/mine18/labels.jsonl its labels

    python3 tests/data/labels/make_cases.py

The labels of the bundled fixtures and mock sites are hand-written in
tests/data/labels/fixtures.jsonl and mocksites.jsonl (see README.md for the rules
every label follows). Element indices differ between the success and the failed
render on purpose in some cases: the miner compares elements by signature.
"""
import copy, json, os, struct, zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def png(rgb):
    raw = b"".join(b"\x00" + bytes(rgb) * 32 for _ in range(20))
    ch = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + ch(b"IHDR", struct.pack(">IIBBBBB", 32, 20, 8, 2, 0, 0, 0))
            + ch(b"IDAT", zlib.compress(raw)) + ch(b"IEND", b""))


# ---------- building blocks ----------

def el(tag, text="", **attrs):
    return {"tag": tag, "text": text, "attrs": {k.replace("_", "-"): str(v) for k, v in attrs.items()}}


class Page:
    """A page: url, title and elements; `base` numbers the elements (a re-render may
    number them differently)."""

    def __init__(self, url, elements, title=None, base=1):
        self.url, self.title = url, title or url.rstrip("/").rsplit("/", 1)[-1]
        self.elements = [dict(e) for e in elements]
        for k, e in enumerate(self.elements):
            e["index"] = base + k
            e.setdefault("attrs", {})

    def idx(self, text):
        for e in self.elements:
            if e["text"] == text or e["attrs"].get("aria-label") == text or e["attrs"].get("name") == text:
                return e["index"]
        raise KeyError(f"{text!r} not on {self.url}")

    def set(self, text, **attrs):
        """A copy of the page with element `text`'s attributes changed (a typed value,
        a check mark)."""
        p = copy.deepcopy(self)
        for e in p.elements:
            if e["text"] == text or e["attrs"].get("name") == text or e["attrs"].get("aria-label") == text:
                e["attrs"].update({k: str(v) for k, v in attrs.items()})
                return p
        raise KeyError(text)

    def renumber(self, base):
        p = copy.deepcopy(self)
        for k, e in enumerate(p.elements):
            e["index"] = base + k
        return p

    def state(self, memory=""):
        els = [{"index": e["index"], "tag": e["tag"], "role": e.get("role", e["tag"]), "text": e["text"],
                "attrs": e["attrs"], "bbox": [0, 20 * k, 200, 18]} for k, e in enumerate(self.elements)]
        return {"url": self.url, "title": self.title, "tabs": [{"id": "T1", "url": self.url, "title": self.title}],
                "elements": els, "dom_text": "", "screenshot": "screenshots/s.png", "memory": memory}


def click(i): return {"name": "click", "params": {"index": i}}
def inp(i, text): return {"name": "input", "params": {"index": i, "text": text}}
def sel(i, text): return {"name": "select_dropdown", "params": {"index": i, "text": text}}
def done(text, ok=True): return {"name": "done", "params": {"text": text, "success": ok}}
def scroll(): return {"name": "scroll", "params": {"down": True, "pages": 1.0}}
def wait(): return {"name": "wait", "params": {"seconds": 2}}
def nav(url): return {"name": "navigate", "params": {"url": url}}
def back(): return {"name": "go_back", "params": {}}
def extract(q): return {"name": "extract", "params": {"query": q}}


def traj(tid, attempt, success, steps, reason="", answer=None):
    """steps: [(Page, action) or (Page, action, error)]"""
    out = []
    n = len(steps)
    for k, st in enumerate(steps):
        page, act = st[0], st[1]
        err = st[2] if len(st) > 2 else None
        s = page.state(memory=f"step {k}")
        s["progress"] = k / (n - 1) if n > 1 else 0.0
        out.append({"index": k, "state": s,
                    "output": {"thinking": "", "evaluation_previous_goal": "", "memory": f"step {k}", "next_goal": "",
                               "actions": [act]},
                    "result": [{"is_done": act["name"] == "done", "success": (success if act["name"] == "done" else None),
                                "error": err, "extracted_content": None}],
                    "timing": None})
    if answer is None:
        last = steps[-1][1]
        answer = last["params"].get("text") if last["name"] == "done" else None
    return {"id": f"{tid}-a{attempt}", "task_id": tid, "attempt": attempt, "round": 1, "reflection": None,
            "source": "synthetic", "teacher": "hand-built",
            "outcome": {"success": success, "score": 1.0 if success else 0.0, "judge": "hand-built",
                        "reason": reason or ("task completed" if success else "task failed"), "final_answer": answer},
            "steps": out}


CASES = []


def case(tid, domain, instruction, category, note, success, loc, kind="fail_contrast"):
    CASES.append({"task": {"task_id": tid, "website": "https://" + domain + ".test", "domain": domain,
                           "category": domain, "instruction": instruction, "source": "synthetic"},
                  "success": success, "loc": loc, "category": category, "note": note, "kind": kind})


# ---------- common pages ----------

def nav_bar(site):
    return [el("a", site), el("a", "Home"), el("a", "Account"), el("input", "", name="q", type="search"),
            el("button", "Search", type="submit")]


def footer():
    return [el("a", "Help"), el("a", "Privacy"), el("a", "About us")]


# ======================================================================
# wrong_element
# ======================================================================

def we_similar_product():
    home = Page("https://shop.test/", nav_bar("Shop") + [el("a", "Running"), el("a", "Hiking")] + footer())
    lst = Page("https://shop.test/running", nav_bar("Shop") + [el("a", "Red runner"), el("a", "Red runner kids"),
               el("a", "Blue runner"), el("select", "Sort Featured | Price", name="sort", value="Featured")] + footer())
    item = Page("https://shop.test/p/red-runner", nav_bar("Shop") + [el("button", "Add to cart"), el("a", "Reviews")] + footer())
    kids = Page("https://shop.test/p/red-runner-kids", nav_bar("Shop") + [el("button", "Add to cart"), el("a", "Reviews")] + footer())
    cart = Page("https://shop.test/cart", nav_bar("Shop") + [el("button", "Checkout")] + footer())
    ok = traj("we-similar-product", 1, True, [(home, click(home.idx("Running"))), (lst, click(lst.idx("Red runner"))),
              (item, click(item.idx("Add to cart"))), (cart, done("Added the Red runner to the cart."))])
    bad = traj("we-similar-product", 2, False, [(home, click(home.idx("Running"))), (lst, click(lst.idx("Red runner kids"))),
               (kids, click(kids.idx("Add to cart"))), (cart, done("Added the Red runner to the cart."))])
    case("we-similar-product", "shopping", "Add the adult Red runner shoe to the cart.", "wrong_element",
         "loc opens the kids' version listed next to the right shoe (a similar item) and adds it; same route otherwise",
         ok, bad)


def we_article():
    front = Page("https://news.test/", nav_bar("News") + [el("a", "Budget vote delayed"), el("a", "Budget vote: live blog"),
                 el("a", "Weather"), el("a", "Sports")] + footer())
    art = Page("https://news.test/a/budget-vote-delayed", nav_bar("News") + [el("p", "The vote moves to Friday."), el("a", "Share")] + footer())
    blog = Page("https://news.test/a/budget-live", nav_bar("News") + [el("p", "Live: members arrive."), el("a", "Share")] + footer())
    ok = traj("we-article", 1, True, [(front, click(front.idx("Budget vote delayed"))), (art, done("The vote moves to Friday."))])
    bad = traj("we-article", 2, False, [(front, click(front.idx("Budget vote: live blog"))), (blog, done("Members are arriving."))])
    case("we-article", "news", "Open the report on the delayed budget vote and say when the vote is.", "wrong_element",
         "loc clicks the neighbouring live-blog link instead of the report, then answers from the wrong article", ok, bad)


def we_apply_vs_save():
    job = Page("https://jobs.test/job/381", nav_bar("Jobs") + [el("h1", "Data engineer"), el("button", "Apply"),
               el("button", "Save"), el("a", "Similar jobs")] + footer())
    job_loc = job.renumber(40)
    form = Page("https://jobs.test/job/381/apply", nav_bar("Jobs") + [el("input", "", name="email", type="email"),
                el("button", "Send application")] + footer())
    form_filled = form.set("email", value="ana@example.com")
    saved = job.set("Save", **{"aria-pressed": "true"}).renumber(40)
    ok = traj("we-apply-vs-save", 1, True, [(job, click(job.idx("Apply"))), (form, inp(form.idx("email"), "ana@example.com")),
              (form_filled, click(form.idx("Send application"))), (Page("https://jobs.test/applied", footer()), done("Applied."))])
    bad = traj("we-apply-vs-save", 2, False, [(job_loc, click(job_loc.idx("Save"))), (saved, done("Applied to the job."))])
    case("we-apply-vs-save", "jobs", "Apply to the data engineer job (job 381) with ana@example.com.", "wrong_element",
         "loc presses Save next to Apply (the page is rendered with other indices), then claims it applied; "
         "the decisive mistake is the wrong button, the done merely follows on a page the success never sees", ok, bad)


def we_price_alert():
    watch = Page("https://money.test/alerts", nav_bar("Money") + [el("a", "Price alert for AAPL"), el("a", "Price alert for AMZN"),
                 el("a", "Price alert for MSFT")] + footer())
    aapl = Page("https://money.test/alerts/aapl", nav_bar("Money") + [el("button", "Delete alert"), el("button", "Edit")] + footer())
    amzn = Page("https://money.test/alerts/amzn", nav_bar("Money") + [el("button", "Delete alert"), el("button", "Edit")] + footer())
    gone = Page("https://money.test/alerts?deleted=1", nav_bar("Money") + footer())
    ok = traj("we-price-alert", 1, True, [(watch, click(watch.idx("Price alert for AAPL"))), (aapl, click(aapl.idx("Delete alert"))),
              (gone, done("Deleted the AAPL alert."))])
    bad = traj("we-price-alert", 2, False, [(watch, click(watch.idx("Price alert for AMZN"))), (amzn, click(amzn.idx("Delete alert"))),
               (gone, done("Deleted the AAPL alert."))])
    case("we-price-alert", "finance", "Delete my AAPL price alert.", "wrong_element",
         "loc opens the AMZN alert instead of AAPL; the links say 'Price alert' but no filter or sort is involved "
         "(a trap for constraint words)", ok, bad)


def we_same_text_buttons():
    res = Page("https://fly.test/results", nav_bar("Fly") + [el("div", "UA 2231 7:30a $112"), el("button", "Select", **{"aria_label": "Select UA 2231"}),
               el("div", "B6 1123 6:05a $129"), el("button", "Select", **{"aria_label": "Select B6 1123"})] + footer())
    ua = Page("https://fly.test/book/ua2231", nav_bar("Fly") + [el("button", "Continue")] + footer())
    b6 = Page("https://fly.test/book/b61123", nav_bar("Fly") + [el("button", "Continue")] + footer())
    end = Page("https://fly.test/book/done", footer())
    ok = traj("we-same-text-buttons", 1, True, [(res, click(res.idx("Select UA 2231"))), (ua, click(ua.idx("Continue"))),
              (end, done("Booked UA 2231."))])
    bad = traj("we-same-text-buttons", 2, False, [(res, click(res.idx("Select B6 1123"))), (b6, click(b6.idx("Continue"))),
               (end, done("Booked the 7:30 flight."))])
    case("we-same-text-buttons", "travel", "Book the 7:30am UA 2231 flight.", "wrong_element",
         "two buttons both read 'Select'; loc presses the one for B6 1123 (they differ by aria-label only)", ok, bad)


def we_after_scrolls():
    lst = Page("https://cook.test/search?q=lasagna", nav_bar("Cook") + [el("a", "Spinach lasagna"), el("a", "Lasagna soup"),
               el("a", "Meat lasagna")] + footer())
    spin = Page("https://cook.test/r/spinach-lasagna", nav_bar("Cook") + [el("p", "Total 1 h 15 min"), el("button", "Save recipe")] + footer())
    soup = Page("https://cook.test/r/lasagna-soup", nav_bar("Cook") + [el("p", "Total 45 min"), el("button", "Save recipe")] + footer())
    ok = traj("we-after-scrolls", 1, True, [(lst, click(lst.idx("Spinach lasagna"))), (spin, click(spin.idx("Save recipe"))),
              (spin.set("Save recipe", **{"aria-pressed": "true"}), done("Saved the spinach lasagna."))])
    bad = traj("we-after-scrolls", 2, False, [(lst, scroll()), (lst, scroll()), (lst, click(lst.idx("Lasagna soup"))),
               (soup, click(soup.idx("Save recipe"))), (soup.set("Save recipe", **{"aria-pressed": "true"}), done("Saved the lasagna."))])
    case("we-after-scrolls", "recipes", "Save the spinach lasagna recipe.", "wrong_element",
         "loc scrolls the list twice (harmless) and then opens the lasagna soup instead of the spinach lasagna", ok, bad)


# ======================================================================
# wrong_input_value
# ======================================================================

def wiv_date():
    form = Page("https://fly.test/", nav_bar("Fly") + [el("input", "", name="from", type="text"), el("input", "", name="depart", type="date"),
                el("button", "Find flights")] + footer())
    f1 = form.set("from", value="BOS")
    f2 = f1.set("depart", value="2026-03-14")
    f2b = f1.set("depart", value="2026-03-04")
    res = Page("https://fly.test/results?d=2026-03-14", nav_bar("Fly") + [el("div", "UA 2231 $112")] + footer())
    resb = Page("https://fly.test/results?d=2026-03-04", nav_bar("Fly") + [el("div", "B6 1123 $89")] + footer())
    ok = traj("wiv-date", 1, True, [(form, inp(form.idx("from"), "BOS")), (f1, inp(form.idx("depart"), "2026-03-14")),
              (f2, click(form.idx("Find flights"))), (res, done("Cheapest: $112"))])
    bad = traj("wiv-date", 2, False, [(form, inp(form.idx("from"), "BOS")), (f1, inp(form.idx("depart"), "2026-03-04")),
               (f2b, click(form.idx("Find flights"))), (resb, done("Cheapest: $89"))])
    case("wiv-date", "travel", "Find the cheapest flight from BOS on March 14, 2026.", "wrong_input_value",
         "loc types 2026-03-04 into the date field instead of 2026-03-14 and then follows the same route", ok, bad)


def wiv_quantity():
    item = Page("https://shop.test/p/socks", nav_bar("Shop") + [el("input", "", name="qty", type="number", value="1"),
                el("button", "Add to cart")] + footer())
    q2 = item.set("qty", value="2")
    q3 = item.set("qty", value="3")
    cart = Page("https://shop.test/cart", nav_bar("Shop") + [el("button", "Checkout")] + footer())
    ok = traj("wiv-quantity", 1, True, [(item, inp(item.idx("qty"), "2")), (q2, click(item.idx("Add to cart"))), (cart, done("2 pairs added."))])
    bad = traj("wiv-quantity", 2, False, [(item, inp(item.idx("qty"), "3")), (q3, click(item.idx("Add to cart"))), (cart, done("Added socks."))])
    case("wiv-quantity", "shopping", "Add two pairs of the wool socks to the cart.", "wrong_input_value",
         "loc sets the quantity to 3 instead of 2", ok, bad)


def wiv_recipient():
    comp = Page("https://mail.test/compose", nav_bar("Mail") + [el("input", "", name="to", type="email"), el("input", "", name="subject"),
                el("button", "Send")] + footer())
    c1 = comp.set("to", value="maria.lopez@example.com")
    c1b = comp.set("to", value="mario.lopez@example.com")
    c2 = c1.set("subject", value="Q3 report")
    c2b = c1b.set("subject", value="Q3 report")
    sent = Page("https://mail.test/sent", nav_bar("Mail") + footer())
    ok = traj("wiv-recipient", 1, True, [(comp, inp(comp.idx("to"), "maria.lopez@example.com")), (c1, inp(comp.idx("subject"), "Q3 report")),
              (c2, click(comp.idx("Send"))), (sent, done("Sent."))])
    bad = traj("wiv-recipient", 2, False, [(comp, inp(comp.idx("to"), "mario.lopez@example.com")), (c1b, inp(comp.idx("subject"), "Q3 report")),
               (c2b, click(comp.idx("Send"))), (sent, done("Sent."))])
    case("wiv-recipient", "email", "Email maria.lopez@example.com with the subject 'Q3 report'.", "wrong_input_value",
         "loc types mario.lopez@... in the To field (one letter off); everything after matches", ok, bad)


def wiv_bedrooms():
    s = Page("https://homes.test/rent", nav_bar("Homes") + [el("select", "Bedrooms Any | 1 | 2 | 3", name="beds", value="Any"),
             el("button", "Show homes")] + footer())
    s3 = s.set("beds", value="3")
    s2 = s.set("beds", value="2")
    r3 = Page("https://homes.test/rent?beds=3", nav_bar("Homes") + [el("a", "12 Elm St, 3 bd")] + footer())
    r2 = Page("https://homes.test/rent?beds=2", nav_bar("Homes") + [el("a", "4 Oak Ave, 2 bd")] + footer())
    ok = traj("wiv-bedrooms", 1, True, [(s, sel(s.idx("beds"), "3")), (s3, click(s.idx("Show homes"))), (r3, done("12 Elm St"))])
    bad = traj("wiv-bedrooms", 2, False, [(s, sel(s.idx("beds"), "2")), (s2, click(s.idx("Show homes"))), (r2, done("4 Oak Ave"))])
    case("wiv-bedrooms", "housing", "Find a 3-bedroom rental and give its address.", "wrong_input_value",
         "loc picks 2 in the bedrooms dropdown: the right control set to another value (it is not skipped, so not a missed constraint)",
         ok, bad)


def wiv_site_search():
    home = Page("https://jobs.test/", nav_bar("Jobs") + [el("a", "Browse categories")] + footer())
    typed = home.set("q", value="data engineer")
    typedb = home.set("q", value="data entry")
    res = Page("https://jobs.test/search?q=data+engineer", nav_bar("Jobs") + [el("a", "Data engineer, Acme")] + footer())
    resb = Page("https://jobs.test/search?q=data+entry", nav_bar("Jobs") + [el("a", "Data entry clerk")] + footer())
    ok = traj("wiv-site-search", 1, True, [(home, inp(home.idx("q"), "data engineer")), (typed, click(home.idx("Search"))),
              (res, click(res.idx("Data engineer, Acme"))), (Page("https://jobs.test/job/1", footer()), done("Data engineer at Acme"))])
    bad = traj("wiv-site-search", 2, False, [(home, inp(home.idx("q"), "data entry")), (typedb, click(home.idx("Search"))),
               (resb, click(resb.idx("Data entry clerk"))), (Page("https://jobs.test/job/2", footer()), done("Data entry clerk"))])
    case("wiv-site-search", "jobs", "Find a data engineer job posting.", "wrong_input_value",
         "loc types 'data entry' into the site's search box (an input, not the search action), so all later pages differ", ok, bad)


def wiv_amount():
    pay = Page("https://bank.test/transfer", nav_bar("Bank") + [el("input", "", name="amount", type="text"), el("button", "Review")] + footer())
    a1 = pay.set("amount", value="250.00")
    a2 = pay.set("amount", value="25.00")
    rev = Page("https://bank.test/transfer/review", nav_bar("Bank") + [el("button", "Confirm")] + footer())
    ok = traj("wiv-amount", 1, True, [(pay, inp(pay.idx("amount"), "250.00")), (a1, click(pay.idx("Review"))), (rev, click(rev.idx("Confirm"))),
              (Page("https://bank.test/transfer/ok", footer()), done("Sent $250."))])
    bad = traj("wiv-amount", 2, False, [(pay, inp(pay.idx("amount"), "25.00")), (a2, click(pay.idx("Review"))), (rev, click(rev.idx("Confirm"))),
               (Page("https://bank.test/transfer/ok", footer()), done("Sent the money."))])
    case("wiv-amount", "finance", "Transfer $250 to savings.", "wrong_input_value",
         "loc types 25.00 instead of 250.00; the review page looks the same (it does not show the amount)", ok, bad)


# ======================================================================
# missed_constraint
# ======================================================================

def mc_sort_price():
    lst = Page("https://shop.test/search?q=kettle", nav_bar("Shop") + [el("select", "Sort Featured | Price: low to high", name="sort", value="Featured"),
               el("a", "Steel kettle $49"), el("a", "Glass kettle $39")] + footer())
    sorted_ = Page("https://shop.test/search?q=kettle&sort=price", nav_bar("Shop") + [el("select", "Sort Featured | Price: low to high", name="sort", value="Price: low to high"),
                   el("a", "Basic kettle $19"), el("a", "Glass kettle $39")] + footer())
    basic = Page("https://shop.test/p/basic-kettle", nav_bar("Shop") + [el("p", "$19")] + footer())
    steel = Page("https://shop.test/p/steel-kettle", nav_bar("Shop") + [el("p", "$49")] + footer())
    ok = traj("mc-sort-price", 1, True, [(lst, sel(lst.idx("sort"), "Price: low to high")), (sorted_, click(sorted_.idx("Basic kettle $19"))),
              (basic, done("The cheapest kettle is the Basic kettle, $19."))])
    bad = traj("mc-sort-price", 2, False, [(lst, click(lst.idx("Steel kettle $49"))), (steel, done("The cheapest kettle is $49."))])
    case("mc-sort-price", "shopping", "Find the cheapest kettle (sort by price).", "missed_constraint",
         "loc never sorts by price and opens the first featured kettle", ok, bad)


def mc_nonstop_filter():
    res = Page("https://fly.test/results", nav_bar("Fly") + [el("input", "Nonstop only", name="nonstop", type="checkbox", checked="false"),
               el("a", "1 stop 6:05a $89"), el("a", "Nonstop 7:30a $112")] + footer())
    filt = Page("https://fly.test/results?nonstop=1", nav_bar("Fly") + [el("input", "Nonstop only", name="nonstop", type="checkbox", checked="true"),
                el("a", "Nonstop 7:30a $112")] + footer())
    f1 = Page("https://fly.test/f/112", footer())
    f2 = Page("https://fly.test/f/89", footer())
    ok = traj("mc-nonstop-filter", 1, True, [(res, click(res.idx("Nonstop only"))), (filt, click(filt.idx("Nonstop 7:30a $112"))),
              (f1, done("Cheapest nonstop: $112"))])
    bad = traj("mc-nonstop-filter", 2, False, [(res, click(res.idx("1 stop 6:05a $89"))), (f2, done("Cheapest nonstop: $89"))])
    case("mc-nonstop-filter", "travel", "Find the cheapest nonstop flight.", "missed_constraint",
         "loc does not tick the 'Nonstop only' filter and takes the cheapest flight overall, which has a stop", ok, bad)


def mc_max_price():
    s = Page("https://homes.test/search", nav_bar("Homes") + [el("input", "", name="max-price", placeholder="Max price", type="number"),
             el("button", "Show homes")] + footer())
    s1 = s.set("max-price", value="2000")
    r = Page("https://homes.test/search?max=2000", nav_bar("Homes") + [el("a", "9 Pine St $1,850")] + footer())
    rb = Page("https://homes.test/search", nav_bar("Homes") + [el("a", "1 Bay Rd $3,400")] + footer())
    ok = traj("mc-max-price", 1, True, [(s, inp(s.idx("max-price"), "2000")), (s1, click(s.idx("Show homes"))), (r, done("9 Pine St"))])
    bad = traj("mc-max-price", 2, False, [(s, click(s.idx("Show homes"))), (rb, done("1 Bay Rd"))])
    case("mc-max-price", "housing", "Find a rental under $2,000 a month.", "missed_constraint",
         "loc presses Show homes without entering the maximum price", ok, bad)


def mc_newest_tab():
    lst = Page("https://news.test/tech", nav_bar("News") + [el("a", "Most read"), el("a", "Newest"), el("a", "Chip plant opens"), el("a", "Phone review")] + footer())
    new = Page("https://news.test/tech?sort=newest", nav_bar("News") + [el("a", "Most read"), el("a", "Newest", **{"aria-current": "true"}),
               el("a", "Robot taxi trial"), el("a", "Chip plant opens")] + footer())
    ok = traj("mc-newest-tab", 1, True, [(lst, click(lst.idx("Newest"))), (new, click(new.idx("Robot taxi trial"))),
              (Page("https://news.test/a/robot-taxi", footer()), done("Robot taxi trial"))])
    bad = traj("mc-newest-tab", 2, False, [(lst, click(lst.idx("Chip plant opens"))),
               (Page("https://news.test/a/chip-plant", footer()), done("Chip plant opens"))])
    case("mc-newest-tab", "news", "Open the newest tech story.", "missed_constraint",
         "loc opens the top story of the default (most read) order without switching to Newest", ok, bad)


def mc_label_then_answer():
    issues = Page("https://code.test/acme/issues", nav_bar("Code") + [el("button", "Labels"), el("a", "#318 Dark mode"), el("a", "#316 Crash at width 0")] + footer())
    labels = Page("https://code.test/acme/issues", nav_bar("Code") + [el("button", "Labels", **{"aria-expanded": "true"}), el("a", "bug"),
                  el("a", "feature"), el("a", "#318 Dark mode"), el("a", "#316 Crash at width 0")] + footer())
    bugs = Page("https://code.test/acme/issues?label=bug", nav_bar("Code") + [el("a", "#316 Crash at width 0")] + footer())
    ok = traj("mc-label-then-answer", 1, True, [(issues, click(issues.idx("Labels"))), (labels, click(labels.idx("bug"))),
              (bugs, done("#316 Crash at width 0"))])
    bad = traj("mc-label-then-answer", 2, False, [(issues, scroll()), (issues, done("#318 Dark mode"))])
    case("mc-label-then-answer", "software", "Report the newest issue labelled bug.", "missed_constraint",
         "loc scrolls, then answers with the newest issue of any label: it skipped the bug label filter (the done follows from that)",
         ok, bad)


def mc_diet_filter():
    lst = Page("https://cook.test/search?q=curry", nav_bar("Cook") + [el("input", "Vegetarian", name="diet-filter", type="checkbox", checked="false"),
               el("a", "Chicken curry"), el("a", "Chickpea curry")] + footer())
    veg = Page("https://cook.test/search?q=curry&diet=veg", nav_bar("Cook") + [el("input", "Vegetarian", name="diet-filter", type="checkbox", checked="true"),
               el("a", "Chickpea curry")] + footer())
    ok = traj("mc-diet-filter", 1, True, [(lst, click(lst.idx("Vegetarian"))), (veg, click(veg.idx("Chickpea curry"))),
              (Page("https://cook.test/r/chickpea", footer()), done("Chickpea curry"))])
    bad = traj("mc-diet-filter", 2, False, [(lst, click(lst.idx("Chicken curry"))),
               (Page("https://cook.test/r/chicken", footer()), done("Chicken curry"))])
    case("mc-diet-filter", "recipes", "Find a vegetarian curry recipe using the diet filter.", "missed_constraint",
         "loc ignores the vegetarian filter and opens the first curry; the filter's name says filter", ok, bad)


# ======================================================================
# premature_done
# ======================================================================

def pd_before_checkout():
    cart = Page("https://shop.test/cart", nav_bar("Shop") + [el("button", "Checkout")] + footer())
    pay = Page("https://shop.test/checkout", nav_bar("Shop") + [el("button", "Place order")] + footer())
    ok = traj("pd-before-checkout", 1, True, [(cart, click(cart.idx("Checkout"))), (pay, click(pay.idx("Place order"))),
              (Page("https://shop.test/order/1", footer()), done("Order placed."))])
    bad = traj("pd-before-checkout", 2, False, [(cart, done("Order placed."))])
    case("pd-before-checkout", "shopping", "Buy the items in the cart.", "premature_done",
         "loc says the order is placed while still on the cart page", ok, bad)


def pd_unsent_mail():
    comp = Page("https://mail.test/compose", nav_bar("Mail") + [el("input", "", name="to", type="email"), el("button", "Send")] + footer())
    c1 = comp.set("to", value="ops@example.com")
    ok = traj("pd-unsent-mail", 1, True, [(comp, inp(comp.idx("to"), "ops@example.com")), (c1, click(comp.idx("Send"))),
              (Page("https://mail.test/sent", footer()), done("Sent to ops."))])
    bad = traj("pd-unsent-mail", 2, False, [(comp, inp(comp.idx("to"), "ops@example.com")), (c1, done("Sent to ops."))])
    case("pd-unsent-mail", "email", "Send an empty email to ops@example.com.", "premature_done",
         "loc fills in the address and declares done without pressing Send", ok, bad)


def pd_half_form():
    f = Page("https://gov.test/renew", nav_bar("Gov") + [el("input", "", name="name"), el("input", "", name="licence"),
             el("input", "", name="zip"), el("button", "Submit")] + footer())
    f1 = f.set("name", value="Ana Diaz")
    f2 = f1.set("licence", value="D1234")
    f3 = f2.set("zip", value="02139")
    ok = traj("pd-half-form", 1, True, [(f, inp(f.idx("name"), "Ana Diaz")), (f1, inp(f.idx("licence"), "D1234")),
              (f2, inp(f.idx("zip"), "02139")), (f3, click(f.idx("Submit"))), (Page("https://gov.test/renew/ok", footer()), done("Renewed."))])
    bad = traj("pd-half-form", 2, False, [(f, inp(f.idx("name"), "Ana Diaz")), (f1, inp(f.idx("licence"), "D1234")),
               (f2, done("Renewed."))])
    case("pd-half-form", "government", "Renew licence D1234 for Ana Diaz, zip 02139.", "premature_done",
         "loc fills two of the three fields and declares done", ok, bad)


def pd_results_claim():
    res = Page("https://stay.test/results?city=lisbon", nav_bar("Stay") + [el("a", "Hotel Sol $90"), el("button", "Book", **{"aria_label": "Book Hotel Sol"})] + footer())
    book = Page("https://stay.test/book/sol", nav_bar("Stay") + [el("button", "Confirm booking")] + footer())
    ok = traj("pd-results-claim", 1, True, [(res, click(res.idx("Book Hotel Sol"))), (book, click(book.idx("Confirm booking"))),
              (Page("https://stay.test/booked", footer()), done("Booked Hotel Sol."))])
    bad = traj("pd-results-claim", 2, False, [(res, done("Booked Hotel Sol for $90."))])
    case("pd-results-claim", "travel", "Book Hotel Sol in Lisbon.", "premature_done",
         "loc claims the booking from the results page, before booking anything", ok, bad)


def pd_misclick_then_done():
    f = Page("https://form.test/survey", [el("select", "Rating 1 | 2 | 3 | 4 | 5", name="rating", value="1"), el("button", "Submit")])
    f5 = f.set("rating", value="5")
    ok = traj("pd-misclick-then-done", 1, True, [(f, sel(f.idx("rating"), "5")), (f5, click(f.idx("Submit"))),
              (Page("https://form.test/thanks", []), done("Submitted."))])
    bad = traj("pd-misclick-then-done", 2, False, [(f, sel(f.idx("rating"), "5")), (f5, click(f.idx("rating"))), (f5, done("Submitted."))])
    case("pd-misclick-then-done", "forms", "Rate the service 5 and submit the survey.", "premature_done",
         "loc selects 5 correctly, clicks the dropdown again (nothing changes), then declares done without Submit "
         "(as in the fixtures' choose-list case)", ok, bad)


def pd_gives_up():
    home = Page("https://jobs.test/", nav_bar("Jobs") + [el("a", "Remote jobs"), el("a", "Employers")] + footer())
    remote = Page("https://jobs.test/remote", nav_bar("Jobs") + [el("a", "Rust developer, Remote")] + footer())
    ok = traj("pd-gives-up", 1, True, [(home, click(home.idx("Remote jobs"))), (remote, click(remote.idx("Rust developer, Remote"))),
              (Page("https://jobs.test/job/7", footer()), done("Rust developer at Ferro"))])
    bad = traj("pd-gives-up", 2, False, [(home, done("I could not find a remote Rust job.", ok=False))])
    case("pd-gives-up", "jobs", "Find a remote Rust developer job.", "premature_done",
         "loc gives up at once (done with success=false) on the home page", ok, bad)


# ======================================================================
# navigation_detour
# ======================================================================

def nd_external_search():
    home = Page("https://lib.test/", nav_bar("Library") + [el("a", "Opening hours"), el("a", "Branches")] + footer())
    hours = Page("https://lib.test/hours", nav_bar("Library") + [el("p", "Mon-Fri 9-18")] + footer())
    g = Page("https://www.google.com/search?q=library+hours", [el("a", "Library hours - Maps"), el("a", "City library - Wiki")])
    wiki = Page("https://wiki.test/City_library", [el("p", "The library opened in 1901.")])
    ok = traj("nd-external-search", 1, True, [(home, click(home.idx("Opening hours"))), (hours, done("Mon-Fri 9-18"))])
    bad = traj("nd-external-search", 2, False, [(home, nav("https://www.google.com/search?q=library+hours")),
               (g, click(g.idx("City library - Wiki"))), (wiki, done("It opened in 1901."))])
    case("nd-external-search", "government", "Find the library's opening hours on its site.", "navigation_detour",
         "loc leaves the site for a web search and ends on an encyclopedia page", ok, bad)


def nd_go_back_wander():
    lst = Page("https://shop.test/lamps", nav_bar("Shop") + [el("a", "Desk lamp"), el("a", "Floor lamp")] + footer())
    desk = Page("https://shop.test/p/desk-lamp", nav_bar("Shop") + [el("button", "Add to cart")] + footer())
    ok = traj("nd-go-back-wander", 1, True, [(lst, click(lst.idx("Desk lamp"))), (desk, click(desk.idx("Add to cart"))),
              (Page("https://shop.test/cart", footer()), done("Added the desk lamp."))])
    home = Page("https://shop.test/", nav_bar("Shop") + [el("a", "Lamps"), el("a", "Sale")] + footer())
    sale = Page("https://shop.test/sale", nav_bar("Shop") + [el("a", "Rugs -20%")] + footer())
    bad = traj("nd-go-back-wander", 2, False, [(lst, click(lst.idx("Desk lamp"))), (desk, back()), (lst, nav("https://shop.test/")),
               (home, click(home.idx("Sale"))), (sale, done("Could not add it.", ok=False))])
    case("nd-go-back-wander", "shopping", "Add the desk lamp to the cart.", "navigation_detour",
         "loc reaches the lamp's page, goes back instead of adding it, then wanders to the home page and the sale", ok, bad)


def nd_menu_wander():
    home = Page("https://bank.test/", nav_bar("Bank") + [el("a", "Statements"), el("a", "Offers"), el("a", "Branches")] + footer())
    st = Page("https://bank.test/statements", nav_bar("Bank") + [el("a", "March 2026 PDF")] + footer())
    offers = Page("https://bank.test/offers", nav_bar("Bank") + [el("a", "Credit cards"), el("a", "Mortgages")] + footer())
    cards = Page("https://bank.test/offers/cards", nav_bar("Bank") + [el("a", "Gold card")] + footer())
    ok = traj("nd-menu-wander", 1, True, [(home, click(home.idx("Statements"))), (st, click(st.idx("March 2026 PDF"))),
              (Page("https://bank.test/statements/2026-03.pdf", []), done("Opened the March statement."))])
    bad = traj("nd-menu-wander", 2, False, [(home, nav("https://bank.test/offers")), (offers, click(offers.idx("Credit cards"))),
               (cards, back()), (offers, nav("https://bank.test/branches")), (Page("https://bank.test/branches", footer()), done("No statement found.", ok=False))])
    case("nd-menu-wander", "finance", "Open my March 2026 statement.", "navigation_detour",
         "loc types URLs of other sections (offers, cards, branches) instead of opening Statements, and gives up", ok, bad)


def nd_detour_pair():
    home = Page("https://shop.test/", nav_bar("Shop") + [el("a", "Men"), el("a", "Women")] + footer())
    typed = home.set("q", value="trail shoe")
    res = Page("https://shop.test/search?q=trail+shoe", nav_bar("Shop") + [el("a", "Trail shoe X")] + footer())
    men = Page("https://shop.test/men", nav_bar("Shop") + [el("a", "Shoes"), el("a", "Shirts")] + footer())
    shoes = Page("https://shop.test/men/shoes", nav_bar("Shop") + [el("a", "Trail shoe X"), el("a", "Loafer")] + footer())
    item = Page("https://shop.test/p/trail-shoe-x", nav_bar("Shop") + [el("button", "Add to cart")] + footer())
    cart = Page("https://shop.test/cart", footer())
    short = traj("nd-detour-pair", 1, True, [(home, inp(home.idx("q"), "trail shoe")), (typed, click(home.idx("Search"))),
                 (res, click(res.idx("Trail shoe X"))), (item, click(item.idx("Add to cart"))), (cart, done("Added."))])
    long = traj("nd-detour-pair", 2, True, [(home, click(home.idx("Men"))), (men, click(men.idx("Shoes"))), (shoes, scroll()),
                (shoes, click(shoes.idx("Trail shoe X"))), (item, scroll()), (item, click(item.idx("Add to cart"))), (cart, done("Added."))])
    case("nd-detour-pair", "shopping", "Add Trail shoe X to the cart.", "navigation_detour",
         "a detour pair: the longer success browses Men > Shoes and scrolls where the shortest searches", short, long, kind="detour")


def nd_detour_pair_help():
    acct = Page("https://mail.test/settings", nav_bar("Mail") + [el("a", "Signature"), el("a", "Help center")] + footer())
    help_ = Page("https://mail.test/help", nav_bar("Mail") + [el("a", "How to add a signature")] + footer())
    howto = Page("https://mail.test/help/signature", nav_bar("Mail") + [el("a", "Open signature settings")] + footer())
    sig = Page("https://mail.test/settings/signature", nav_bar("Mail") + [el("input", "", name="signature"), el("button", "Save")] + footer())
    sig1 = sig.set("signature", value="Ana")
    saved = Page("https://mail.test/settings/signature?saved=1", footer())
    short = traj("nd-detour-pair-help", 1, True, [(acct, click(acct.idx("Signature"))), (sig, inp(sig.idx("signature"), "Ana")),
                 (sig1, click(sig.idx("Save"))), (saved, done("Saved."))])
    long = traj("nd-detour-pair-help", 2, True, [(acct, click(acct.idx("Help center"))), (help_, click(help_.idx("How to add a signature"))),
                (howto, click(howto.idx("Open signature settings"))), (sig, inp(sig.idx("signature"), "Ana")), (sig1, click(sig.idx("Save"))),
                (saved, done("Saved."))])
    case("nd-detour-pair-help", "email", "Set my email signature to 'Ana'.", "navigation_detour",
         "a detour pair: the longer success reads the help center first", short, long, kind="detour")


# ======================================================================
# loop_stall
# ======================================================================

def ls_load_more():
    lst = Page("https://news.test/archive", nav_bar("News") + [el("button", "Load more"), el("a", "Older: 2019 floods")] + footer())
    more = Page("https://news.test/archive?page=2", nav_bar("News") + [el("button", "Load more"), el("a", "2018 storm")] + footer())
    ok = traj("ls-load-more", 1, True, [(lst, click(lst.idx("Load more"))), (more, click(more.idx("2018 storm"))),
              (Page("https://news.test/a/2018-storm", footer()), done("2018 storm"))])
    bad = traj("ls-load-more", 2, False, [(lst, click(lst.idx("Load more"))), (more, click(more.idx("Load more"))),
               (more, click(more.idx("Load more"))), (more, click(more.idx("Load more"))), (more, click(more.idx("Load more")))])
    case("ls-load-more", "news", "Open the 2018 storm story in the archive.", "loop_stall",
         "loc keeps pressing Load more on page 2, which changes nothing, until it runs out of steps", ok, bad)


def ls_tab_cycle():
    a = Page("https://health.test/clinic?tab=info", nav_bar("Health") + [el("a", "Info"), el("a", "Doctors"), el("a", "Book visit")] + footer())
    b = Page("https://health.test/clinic?tab=doctors", nav_bar("Health") + [el("a", "Info"), el("a", "Doctors"), el("a", "Dr. Ito")] + footer())
    ok = traj("ls-tab-cycle", 1, True, [(a, click(a.idx("Book visit"))), (Page("https://health.test/book", footer()), done("Booked."))])
    bad = traj("ls-tab-cycle", 2, False, [(a, click(a.idx("Doctors"))), (b, click(b.idx("Info"))), (a, click(a.idx("Doctors"))),
               (b, click(b.idx("Info"))), (a, click(a.idx("Doctors"))), (b, click(b.idx("Info")))])
    case("ls-tab-cycle", "health", "Book a visit at the clinic.", "loop_stall",
         "loc switches between the Info and Doctors tabs back and forth (an A-B-A-B cycle)", ok, bad)


def ls_resubmit():
    f = Page("https://gov.test/permit", nav_bar("Gov") + [el("input", "", name="plate"), el("button", "Check")] + footer())
    fv = f.set("plate", value="7ABC123")
    err = Page("https://gov.test/permit?err=format", nav_bar("Gov") + [el("p", "Plate must have 7 characters without spaces"),
               el("input", "", name="plate", value="7ABC 123"), el("button", "Check")] + footer())
    ok = traj("ls-resubmit", 1, True, [(f, inp(f.idx("plate"), "7ABC123")), (fv, click(f.idx("Check"))),
              (Page("https://gov.test/permit/ok", footer()), done("Permit valid."))])
    bad = traj("ls-resubmit", 2, False, [(f, inp(f.idx("plate"), "7ABC 123")), (err, click(err.idx("Check"))), (err, click(err.idx("Check"))),
               (err, click(err.idx("Check"))), (err, click(err.idx("Check")))])
    case("ls-resubmit", "government", "Check the parking permit for plate 7ABC123.", "wrong_input_value",
         "loc types the plate with a space, then presses Check on the error page again and again without fixing it; "
         "the loop is on a page only the wrong value leads to, so by the rules the decisive failure is the value "
         "(revised from loop_stall on review: the first label contradicted the written rules)", ok, bad)


def ls_scroll_forever():
    lst = Page("https://cook.test/desserts", nav_bar("Cook") + [el("a", "Lemon tart"), el("a", "Brownies")] + footer())
    ok = traj("ls-scroll-forever", 1, True, [(lst, click(lst.idx("Lemon tart"))), (Page("https://cook.test/r/lemon-tart", footer()), done("Lemon tart"))])
    bad = traj("ls-scroll-forever", 2, False, [(lst, scroll()), (lst, scroll()), (lst, scroll()), (lst, scroll()), (lst, scroll())])
    case("ls-scroll-forever", "recipes", "Open the lemon tart recipe.", "loop_stall",
         "loc scrolls the list over and over (the page does not change) and never clicks", ok, bad)


def ls_intercepted():
    inbox = Page("https://mail.test/inbox", nav_bar("Mail") + [el("button", "Compose"), el("a", "Dana: lunch")] + footer())
    comp = Page("https://mail.test/inbox?compose=1", nav_bar("Mail") + [el("button", "Compose"), el("a", "Dana: lunch"),
                el("input", "", name="to", type="email"), el("button", "Send")] + footer())
    c1 = comp.set("to", value="dana@example.com")
    e = "Element with index 6 is not clickable: another element (div.overlay) would receive the click"
    ok = traj("ls-intercepted", 1, True, [(inbox, click(inbox.idx("Compose"))), (comp, inp(comp.idx("to"), "dana@example.com")),
              (c1, click(comp.idx("Send"))), (Page("https://mail.test/sent", footer()), done("Sent."))])
    bad = traj("ls-intercepted", 2, False, [(inbox, click(inbox.idx("Compose"))), (comp, click(comp.idx("Compose")), e),
               (comp, click(comp.idx("Compose")), e), (comp, click(comp.idx("Compose")), e), (comp, wait())])
    case("ls-intercepted", "email", "Email dana@example.com.", "loop_stall",
         "loc keeps clicking Compose behind the open compose dialog; the 'not clickable' errors are the agent's "
         "own doing (the site works), so this is a stall, not a technical obstruction", ok, bad)


# ======================================================================
# extraction_error
# ======================================================================

def ee_wrong_number():
    r = Page("https://cook.test/r/spinach-lasagna", nav_bar("Cook") + [el("p", "Prep 25 min"), el("p", "Cook 50 min"), el("p", "Total 1 h 15 min")] + footer())
    lst = Page("https://cook.test/search?q=lasagna", nav_bar("Cook") + [el("a", "Spinach lasagna")] + footer())
    ok = traj("ee-wrong-number", 1, True, [(lst, click(lst.idx("Spinach lasagna"))), (r, done("Total time: 1 h 15 min"))])
    bad = traj("ee-wrong-number", 2, False, [(lst, click(lst.idx("Spinach lasagna"))), (r, done("Total time: 25 min"))])
    case("ee-wrong-number", "recipes", "How long does the spinach lasagna take in total?", "extraction_error",
         "same route to the right recipe; loc reports the prep time as the total", ok, bad)


def ee_extract_query():
    p = Page("https://shop.test/p/tent", nav_bar("Shop") + [el("p", "Weight 2.1 kg"), el("p", "Packed size 45 cm")] + footer())
    ok = traj("ee-extract-query", 1, True, [(p, extract("tent weight")), (p, done("2.1 kg"))])
    bad = traj("ee-extract-query", 2, False, [(p, extract("tent size")), (p, done("45 cm"))])
    case("ee-extract-query", "shopping", "What does the tent weigh?", "extraction_error",
         "on the right page, loc extracts the packed size instead of the weight and reports it", ok, bad)


def ee_wrong_row():
    t = Page("https://sport.test/table", nav_bar("Sport") + [el("td", "1 Rovers 61 pts"), el("td", "2 United 58 pts"), el("td", "3 City 57 pts")] + footer())
    home = Page("https://sport.test/", nav_bar("Sport") + [el("a", "League table")] + footer())
    ok = traj("ee-wrong-row", 1, True, [(home, click(home.idx("League table"))), (t, done("United have 58 points."))])
    bad = traj("ee-wrong-row", 2, False, [(home, click(home.idx("League table"))), (t, done("United have 61 points."))])
    case("ee-wrong-row", "sports", "How many points do United have?", "extraction_error",
         "both reach the table; loc reads the points of the row above", ok, bad)


def ee_variant_price():
    p = Page("https://shop.test/p/phone", nav_bar("Shop") + [el("p", "128 GB $699"), el("p", "256 GB $799")] + footer())
    lst = Page("https://shop.test/phones", nav_bar("Shop") + [el("a", "Phone 12")] + footer())
    ok = traj("ee-variant-price", 1, True, [(lst, click(lst.idx("Phone 12"))), (p, extract("price of 256 GB")), (p, done("$799"))])
    bad = traj("ee-variant-price", 2, False, [(lst, click(lst.idx("Phone 12"))), (p, extract("price of 256 GB")), (p, done("$699"))])
    case("ee-variant-price", "shopping", "What does the 256 GB Phone 12 cost?", "extraction_error",
         "same route and the same extraction; loc reports the 128 GB price", ok, bad)


def ee_snippet():
    lst = Page("https://health.test/search?q=ibuprofen", nav_bar("Health") + [el("a", "Ibuprofen: dosage"), el("p", "Adults: see label...")] + footer())
    page = Page("https://health.test/drug/ibuprofen", nav_bar("Health") + [el("p", "Adults: 200-400 mg every 4-6 h")] + footer())
    ok = traj("ee-snippet", 1, True, [(lst, click(lst.idx("Ibuprofen: dosage"))), (page, extract("adult dose")), (page, done("200-400 mg every 4-6 h"))])
    bad = traj("ee-snippet", 2, False, [(lst, extract("adult dose")), (lst, done("See the label."))])
    case("ee-snippet", "health", "What is the adult dose of ibuprofen?", "premature_done",
         "loc extracts from the search snippet and answers instead of opening the page: it never reached the right "
         "place, so by the rules it answered early (revised from extraction_error on review)", ok, bad)


def ee_child_dose():
    lst = Page("https://health.test/search?q=paracetamol", nav_bar("Health") + [el("a", "Paracetamol: dosage")] + footer())
    page = Page("https://health.test/drug/paracetamol", nav_bar("Health") + [el("p", "Adults: 500-1000 mg every 4-6 h"),
                el("p", "Children 6-12: 250-500 mg every 4-6 h")] + footer())
    ok = traj("ee-child-dose", 1, True, [(lst, click(lst.idx("Paracetamol: dosage"))), (page, extract("dose for a child of 8")),
              (page, done("250-500 mg every 4-6 h"))])
    bad = traj("ee-child-dose", 2, False, [(lst, click(lst.idx("Paracetamol: dosage"))), (page, extract("dose for a child of 8")),
               (page, done("500-1000 mg every 4-6 h"))])
    case("ee-child-dose", "health", "What paracetamol dose is right for an 8-year-old?", "extraction_error",
         "same route and the same extraction on the right page; loc reports the adult line", ok, bad)


# ======================================================================
# technical_obstruction
# ======================================================================

def to_captcha():
    home = Page("https://fly.test/", nav_bar("Fly") + [el("a", "Deals")] + footer())
    deals = Page("https://fly.test/deals", nav_bar("Fly") + [el("a", "Lisbon $199")] + footer())
    cap = Page("https://fly.test/challenge", [el("div", "Verify you are human"), el("input", "", type="checkbox")], title="Verify you are human")
    ok = traj("to-captcha", 1, True, [(home, click(home.idx("Deals"))), (deals, done("Lisbon for $199"))])
    bad = traj("to-captcha", 2, False, [(home, click(home.idx("Deals"))), (cap, done("Blocked by a check.", ok=False))])
    case("to-captcha", "travel", "What is the top flight deal?", "technical_obstruction",
         "the same click leads loc to a captcha page the success never met", ok, bad)


def to_forbidden():
    home = Page("https://homes.test/", nav_bar("Homes") + [el("a", "Listings")] + footer())
    lst = Page("https://homes.test/listings", nav_bar("Homes") + [el("a", "2 bd, $1,900")] + footer())
    denied = Page("https://homes.test/listings", [el("h1", "403 Forbidden")], title="403 Forbidden")
    ok = traj("to-forbidden", 1, True, [(home, click(home.idx("Listings"))), (lst, done("2 bd for $1,900"))])
    bad = traj("to-forbidden", 2, False, [(home, click(home.idx("Listings"))), (denied, done("Access denied.", ok=False))])
    case("to-forbidden", "housing", "Give the first listing's rent.", "technical_obstruction",
         "loc gets a 403 block page on the listings", ok, bad)


def to_timeout():
    home = Page("https://gov.test/", nav_bar("Gov") + [el("a", "Tax forms")] + footer())
    forms = Page("https://gov.test/tax", nav_bar("Gov") + [el("a", "Form 1040")] + footer())
    ok = traj("to-timeout", 1, True, [(home, click(home.idx("Tax forms"))), (forms, click(forms.idx("Form 1040"))),
              (Page("https://gov.test/tax/1040.pdf", []), done("Opened Form 1040."))])
    bad = traj("to-timeout", 2, False, [(home, click(home.idx("Tax forms"))), (forms, click(forms.idx("Form 1040")), "net::ERR_TIMED_OUT"),
               (forms, done("The form did not load.", ok=False))])
    case("to-timeout", "government", "Open tax Form 1040.", "technical_obstruction",
         "loc's click on the form link times out (net::ERR_TIMED_OUT); same route", ok, bad)


def to_crash():
    p = Page("https://sport.test/live", nav_bar("Sport") + [el("a", "Match centre")] + footer())
    mc = Page("https://sport.test/live/match", nav_bar("Sport") + [el("p", "2-1, 78'")] + footer())
    crashed = Page("chrome-error://chromewebdata/", [el("div", "Aw, Snap! The page crashed")], title="Page crash")
    ok = traj("to-crash", 1, True, [(p, click(p.idx("Match centre"))), (mc, done("2-1 after 78 minutes"))])
    bad = traj("to-crash", 2, False, [(p, click(p.idx("Match centre"))), (crashed, done("The page crashed.", ok=False))])
    case("to-crash", "sports", "What is the live score?", "technical_obstruction",
         "the match centre crashes the renderer for loc", ok, bad)


def to_rate_limited():
    home = Page("https://jobs.test/", nav_bar("Jobs") + [el("a", "Browse")] + footer())
    typed = home.set("q", value="nurse")
    res = Page("https://jobs.test/search?q=nurse", nav_bar("Jobs") + [el("a", "Night nurse")] + footer())
    limited = Page("https://jobs.test/search?q=nurse", [el("h1", "429 Too Many Requests")], title="Too Many Requests")
    ok = traj("to-rate-limited", 1, True, [(home, inp(home.idx("q"), "nurse")), (typed, click(home.idx("Search"))), (res, done("Night nurse"))])
    bad = traj("to-rate-limited", 2, False, [(home, inp(home.idx("q"), "nurse")), (typed, click(home.idx("Search"))),
               (limited, wait()), (limited, done("Rate limited.", ok=False))])
    case("to-rate-limited", "jobs", "Find a nurse job.", "technical_obstruction",
         "the search answers 429 Too Many Requests for loc", ok, bad)


# ======================================================================
# held out: written after the heuristic was frozen (its figures on these are the
# honest ones); same rules, new sites and shapes
# ======================================================================

HELDOUT = []


def heldout(fn):
    def run():
        global CASES
        saved, CASES = CASES, HELDOUT
        try:
            fn()
        finally:
            CASES = saved
    run.heldout = True
    return run


@heldout
def ho_we_wrong_tab():
    acct = Page("https://bank.test/account", nav_bar("Bank") + [el("a", "Checking"), el("a", "Savings"), el("a", "Credit card")] + footer())
    chk = Page("https://bank.test/account/checking", nav_bar("Bank") + [el("p", "Balance $1,204.10")] + footer())
    sav = Page("https://bank.test/account/savings", nav_bar("Bank") + [el("p", "Balance $8,950.00")] + footer())
    ok = traj("ho-we-wrong-tab", 1, True, [(acct, click(acct.idx("Savings"))), (sav, done("$8,950.00"))])
    bad = traj("ho-we-wrong-tab", 2, False, [(acct, click(acct.idx("Checking"))), (chk, done("$1,204.10"))])
    case("ho-we-wrong-tab", "finance", "What is my savings balance?", "wrong_element",
         "loc opens Checking instead of Savings and reports that balance", ok, bad)


@heldout
def ho_we_wrong_field():
    f = Page("https://gov.test/contact", nav_bar("Gov") + [el("input", "", name="phone", placeholder="Phone"),
             el("input", "", name="email", placeholder="Email"), el("button", "Send")] + footer())
    f_ok = f.set("email", value="li@example.com")
    f_bad = f.set("phone", value="li@example.com")
    ok = traj("ho-we-wrong-field", 1, True, [(f, inp(f.idx("email"), "li@example.com")), (f_ok, click(f.idx("Send"))),
              (Page("https://gov.test/contact/sent", footer()), done("Sent."))])
    bad = traj("ho-we-wrong-field", 2, False, [(f, inp(f.idx("phone"), "li@example.com")), (f_bad, click(f.idx("Send"))),
               (Page("https://gov.test/contact?err=email", footer()), done("Sent.", ok=False))])
    case("ho-we-wrong-field", "government", "Send the contact form with the email li@example.com.", "wrong_element",
         "loc types the address into the Phone field: the right value in another control", ok, bad)


@heldout
def ho_wiv_zip():
    f = Page("https://stay.test/search", nav_bar("Stay") + [el("input", "", name="zip", placeholder="ZIP code"), el("button", "Find")] + footer())
    ok = traj("ho-wiv-zip", 1, True, [(f, inp(f.idx("zip"), "94110")), (f.set("zip", value="94110"), click(f.idx("Find"))),
              (Page("https://stay.test/search?zip=94110", footer()), done("3 hotels"))])
    bad = traj("ho-wiv-zip", 2, False, [(f, inp(f.idx("zip"), "94101")), (f.set("zip", value="94101"), click(f.idx("Find"))),
               (Page("https://stay.test/search?zip=94101", footer()), done("5 hotels"))])
    case("ho-wiv-zip", "travel", "How many hotels are there in ZIP 94110?", "wrong_input_value",
         "loc types 94101 instead of 94110", ok, bad)


@heldout
def ho_wiv_size_dropdown():
    p = Page("https://shop.test/p/jacket", nav_bar("Shop") + [el("select", "Size S | M | L", name="size", value="S"), el("button", "Add to cart")] + footer())
    ok = traj("ho-wiv-size-dropdown", 1, True, [(p, sel(p.idx("size"), "L")), (p.set("size", value="L"), click(p.idx("Add to cart"))),
              (Page("https://shop.test/cart", footer()), done("Added size L."))])
    bad = traj("ho-wiv-size-dropdown", 2, False, [(p, sel(p.idx("size"), "M")), (p.set("size", value="M"), click(p.idx("Add to cart"))),
               (Page("https://shop.test/cart", footer()), done("Added size L."))])
    case("ho-wiv-size-dropdown", "shopping", "Add the jacket in size L to the cart.", "wrong_input_value",
         "loc picks M in the size dropdown", ok, bad)


@heldout
def ho_mc_date_range():
    r = Page("https://news.test/search?q=election", nav_bar("News") + [el("select", "Date Any time | Past week | Past year", name="date", value="Any time"),
             el("a", "Election 2016 recap"), el("a", "Election night live")] + footer())
    wk = Page("https://news.test/search?q=election&date=week", nav_bar("News") + [el("select", "Date Any time | Past week | Past year", name="date", value="Past week"),
              el("a", "Election night live")] + footer())
    ok = traj("ho-mc-date-range", 1, True, [(r, sel(r.idx("date"), "Past week")), (wk, click(wk.idx("Election night live"))),
              (Page("https://news.test/a/live", footer()), done("Election night live"))])
    bad = traj("ho-mc-date-range", 2, False, [(r, click(r.idx("Election 2016 recap"))), (Page("https://news.test/a/2016", footer()), done("Election 2016 recap"))])
    case("ho-mc-date-range", "news", "Open an election story from the past week.", "missed_constraint",
         "loc never sets the date range and opens an old story", ok, bad)


@heldout
def ho_mc_rating_filter():
    lst = Page("https://cook.test/search?q=bread", nav_bar("Cook") + [el("input", "4 stars and up", name="rating-filter", type="checkbox", checked="false"),
               el("a", "Quick bread (3.1)"), el("a", "Sourdough (4.6)")] + footer())
    f = Page("https://cook.test/search?q=bread&rating=4", nav_bar("Cook") + [el("input", "4 stars and up", name="rating-filter", type="checkbox", checked="true"),
             el("a", "Sourdough (4.6)")] + footer())
    ok = traj("ho-mc-rating-filter", 1, True, [(lst, click(lst.idx("4 stars and up"))), (f, click(f.idx("Sourdough (4.6)"))),
              (Page("https://cook.test/r/sourdough", footer()), done("Sourdough"))])
    bad = traj("ho-mc-rating-filter", 2, False, [(lst, click(lst.idx("Quick bread (3.1)"))), (Page("https://cook.test/r/quick", footer()), done("Quick bread"))])
    case("ho-mc-rating-filter", "recipes", "Find a bread recipe rated 4 stars or more, using the rating filter.", "missed_constraint",
         "loc skips the rating filter and opens a 3.1-star recipe", ok, bad)


@heldout
def ho_pd_before_confirm():
    rev = Page("https://bank.test/pay/review", nav_bar("Bank") + [el("p", "Pay $80 to City Power"), el("button", "Confirm payment")] + footer())
    ok = traj("ho-pd-before-confirm", 1, True, [(rev, click(rev.idx("Confirm payment"))), (Page("https://bank.test/pay/done", footer()), done("Paid."))])
    bad = traj("ho-pd-before-confirm", 2, False, [(rev, done("Paid the bill."))])
    case("ho-pd-before-confirm", "finance", "Pay the $80 power bill.", "premature_done",
         "loc claims the payment on the review page without confirming", ok, bad)


@heldout
def ho_pd_one_of_two():
    f = Page("https://jobs.test/profile", nav_bar("Jobs") + [el("input", "", name="city"), el("input", "", name="title"), el("button", "Save")] + footer())
    f1 = f.set("city", value="Oslo")
    f2 = f1.set("title", value="Nurse")
    ok = traj("ho-pd-one-of-two", 1, True, [(f, inp(f.idx("city"), "Oslo")), (f1, inp(f.idx("title"), "Nurse")), (f2, click(f.idx("Save"))),
              (Page("https://jobs.test/profile?saved=1", footer()), done("Saved."))])
    bad = traj("ho-pd-one-of-two", 2, False, [(f, inp(f.idx("city"), "Oslo")), (f1, click(f.idx("Save"))),
               (Page("https://jobs.test/profile?saved=1", footer()), done("Saved."))])
    case("ho-pd-one-of-two", "jobs", "Set my profile city to Oslo and title to Nurse, then save.", "premature_done",
         "loc saves after the city only: it stops the task early (Save is pressed, the title step is skipped; not a filter)",
         ok, bad)


@heldout
def ho_nd_back_out():
    item = Page("https://shop.test/p/mug", nav_bar("Shop") + [el("button", "Add to cart")] + footer())
    lst = Page("https://shop.test/mugs", nav_bar("Shop") + [el("a", "Blue mug")] + footer())
    ok = traj("ho-nd-back-out", 1, True, [(lst, click(lst.idx("Blue mug"))), (item, click(item.idx("Add to cart"))),
              (Page("https://shop.test/cart", footer()), done("Added."))])
    bad = traj("ho-nd-back-out", 2, False, [(lst, click(lst.idx("Blue mug"))), (item, back()), (lst, back()),
               (Page("https://shop.test/", nav_bar("Shop") + footer()), done("Could not add it.", ok=False))])
    case("ho-nd-back-out", "shopping", "Add the blue mug to the cart.", "navigation_detour",
         "loc goes back twice from the mug's page and ends on the home page", ok, bad)


@heldout
def ho_nd_other_site():
    home = Page("https://lib.test/", nav_bar("Library") + [el("a", "eBooks")] + footer())
    eb = Page("https://lib.test/ebooks", nav_bar("Library") + [el("a", "Borrow Dune")] + footer())
    shop = Page("https://bookshop.test/dune", [el("button", "Buy $9.99")])
    ok = traj("ho-nd-other-site", 1, True, [(home, click(home.idx("eBooks"))), (eb, click(eb.idx("Borrow Dune"))),
              (Page("https://lib.test/loans", footer()), done("Borrowed."))])
    bad = traj("ho-nd-other-site", 2, False, [(home, nav("https://bookshop.test/dune")), (shop, done("Found Dune for $9.99.", ok=False))])
    case("ho-nd-other-site", "education", "Borrow the Dune ebook from the library.", "navigation_detour",
         "loc goes to a bookshop site instead of the library's eBooks", ok, bad)


@heldout
def ho_ls_next_page():
    p = Page("https://jobs.test/search?page=9", nav_bar("Jobs") + [el("button", "Next page"), el("a", "Welder")] + footer())
    ok = traj("ho-ls-next-page", 1, True, [(p, click(p.idx("Welder"))), (Page("https://jobs.test/job/welder", footer()), done("Welder"))])
    bad = traj("ho-ls-next-page", 2, False, [(p, click(p.idx("Next page"))), (p, click(p.idx("Next page"))), (p, click(p.idx("Next page"))), (p, click(p.idx("Next page")))])
    case("ho-ls-next-page", "jobs", "Open the welder job.", "loop_stall",
         "loc presses a Next page button that does nothing, again and again", ok, bad)


@heldout
def ho_ls_dropdown_cycle():
    p = Page("https://homes.test/map", nav_bar("Homes") + [el("button", "Map"), el("button", "List"), el("a", "Loft on 5th")] + footer())
    m = Page("https://homes.test/map?view=list", nav_bar("Homes") + [el("button", "Map"), el("button", "List"), el("a", "Loft on 5th")] + footer())
    ok = traj("ho-ls-dropdown-cycle", 1, True, [(p, click(p.idx("Loft on 5th"))), (Page("https://homes.test/h/loft", footer()), done("Loft on 5th"))])
    bad = traj("ho-ls-dropdown-cycle", 2, False, [(p, click(p.idx("List"))), (m, click(m.idx("Map"))), (p, click(p.idx("List"))),
               (m, click(m.idx("Map"))), (p, click(p.idx("List")))])
    case("ho-ls-dropdown-cycle", "housing", "Open the loft listing.", "loop_stall",
         "loc toggles between the map and list views", ok, bad)


@heldout
def ho_ee_wrong_date():
    ev = Page("https://lib.test/events/talk", nav_bar("Library") + [el("p", "Author talk: May 3, 6 pm"), el("p", "Posted April 20")] + footer())
    home = Page("https://lib.test/events", nav_bar("Library") + [el("a", "Author talk")] + footer())
    ok = traj("ho-ee-wrong-date", 1, True, [(home, click(home.idx("Author talk"))), (ev, done("May 3, 6 pm"))])
    bad = traj("ho-ee-wrong-date", 2, False, [(home, click(home.idx("Author talk"))), (ev, done("April 20"))])
    case("ho-ee-wrong-date", "education", "When is the author talk?", "extraction_error",
         "right page; loc reports the posting date", ok, bad)


@heldout
def ho_ee_units():
    p = Page("https://health.test/bmi", nav_bar("Health") + [el("p", "Healthy weight for 1.80 m: 60-81 kg")] + footer())
    ok = traj("ho-ee-units", 1, True, [(p, extract("healthy weight range")), (p, done("60-81 kg"))])
    bad = traj("ho-ee-units", 2, False, [(p, extract("healthy weight range")), (p, done("1.80 m"))])
    case("ho-ee-units", "health", "What is the healthy weight range for 1.80 m?", "extraction_error",
         "same extraction; loc reports the height", ok, bad)


@heldout
def ho_to_blocked():
    home = Page("https://fare.test/", nav_bar("Fare") + [el("a", "Timetable")] + footer())
    tt = Page("https://fare.test/timetable", nav_bar("Fare") + [el("p", "Next bus 8:12")] + footer())
    blk = Page("https://fare.test/timetable", [el("h1", "Access denied"), el("p", "You have been blocked")], title="Access denied")
    ok = traj("ho-to-blocked", 1, True, [(home, click(home.idx("Timetable"))), (tt, done("8:12"))])
    bad = traj("ho-to-blocked", 2, False, [(home, click(home.idx("Timetable"))), (blk, done("Blocked.", ok=False))])
    case("ho-to-blocked", "travel", "When is the next bus?", "technical_obstruction",
         "the timetable page answers Access denied to loc", ok, bad)


@heldout
def ho_to_net_error():
    home = Page("https://sport.test/", nav_bar("Sport") + [el("a", "Fixtures")] + footer())
    fx = Page("https://sport.test/fixtures", nav_bar("Sport") + [el("p", "Sat: Rovers v City")] + footer())
    ok = traj("ho-to-net-error", 1, True, [(home, click(home.idx("Fixtures"))), (fx, done("Rovers v City"))])
    bad = traj("ho-to-net-error", 2, False, [(home, click(home.idx("Fixtures")), "net::ERR_CONNECTION_RESET"),
               (home, click(home.idx("Fixtures")), "net::ERR_CONNECTION_RESET"), (home, done("The site is down.", ok=False))])
    case("ho-to-net-error", "sports", "Who plays on Saturday?", "technical_obstruction",
         "the connection resets on every try for loc (it retries once, which is not a stall)", ok, bad)


# ======================================================================
# mine18: 3 categories x 6 tasks over 6 domains, one known divergence each
# ======================================================================

M18 = []


def m18(tid, domain, instruction, category, note, ok, bad):
    M18.append({"task": {"task_id": tid, "website": "https://" + domain + ".test", "domain": domain, "category": domain,
                         "instruction": instruction, "source": "synthetic"}, "success": ok, "loc": bad,
                "category": category, "note": note, "kind": "fail_contrast"})


def m18_site(domain, k):
    """A small site: home with sections, a list with items and a sort control, an item page."""
    site = f"https://{domain}.test"
    sections = ["Browse", "Deals", "Help center"]
    items = [f"{domain.title()} item {c}" for c in "ABCD"]
    home = Page(f"{site}/", nav_bar(domain.title()) + [el("a", s) for s in sections] + footer())
    lst = Page(f"{site}/browse", nav_bar(domain.title()) + [el("select", "Sort Relevance | Price: low to high", name="sort", value="Relevance")]
               + [el("a", t) for t in items] + footer())
    srt = Page(f"{site}/browse?sort=price", nav_bar(domain.title()) + [el("select", "Sort Relevance | Price: low to high", name="sort", value="Price: low to high")]
               + [el("a", t) for t in reversed(items)] + footer())
    pages = {t: Page(f"{site}/p/{t[-1].lower()}", nav_bar(domain.title()) + [el("h1", t), el("button", "Add to list"), el("a", "Reviews")] + footer())
             for t in items}
    return home, lst, srt, items, pages


def build_m18():
    domains = ["shopping", "travel", "recipes", "housing", "jobs", "news"]
    for k, d in enumerate(domains):
        home, lst, srt, items, pages = m18_site(d, k)
        end = Page(f"https://{d}.test/list", footer())
        # wrong_element: the item next to the right one (two variants of the similar-item slip)
        want, slip = items[k % 3], items[k % 3 + 1]
        ok = traj(f"m18-{d}-we", 1, True, [(home, click(home.idx("Browse"))), (lst, click(lst.idx(want))),
                  (pages[want], click(pages[want].idx("Add to list"))), (end, done(f"Added {want}."))])
        bad = traj(f"m18-{d}-we", 2, False, [(home, click(home.idx("Browse"))), (lst, click(lst.idx(slip))),
                   (pages[slip], click(pages[slip].idx("Add to list"))), (end, done(f"Added {want}."))])
        m18(f"m18-{d}-we", d, f"Add {want} to my list.", "wrong_element", f"loc opens {slip} listed next to {want}", ok, bad)
        # missed_constraint: the cheapest item needs the price sort; loc takes the first of the default order
        cheapest = items[-1]
        ok = traj(f"m18-{d}-mc", 1, True, [(home, click(home.idx("Browse"))), (lst, sel(lst.idx("sort"), "Price: low to high")),
                  (srt, click(srt.idx(cheapest))), (pages[cheapest], done(f"The cheapest is {cheapest}."))])
        bad = traj(f"m18-{d}-mc", 2, False, [(home, click(home.idx("Browse"))), (lst, click(lst.idx(items[0]))),
                   (pages[items[0]], done(f"The cheapest is {items[0]}."))])
        m18(f"m18-{d}-mc", d, "Open the cheapest item, sorting by price.", "missed_constraint",
            "loc never sorts by price and opens the first item of the default order", ok, bad)
        # premature_done: loc declares done on the item page before adding it
        want = items[(k + 1) % 4]
        ok = traj(f"m18-{d}-pd", 1, True, [(home, click(home.idx("Browse"))), (lst, click(lst.idx(want))),
                  (pages[want], click(pages[want].idx("Add to list"))), (end, done(f"Added {want}."))])
        bad = traj(f"m18-{d}-pd", 2, False, [(home, click(home.idx("Browse"))), (lst, click(lst.idx(want))),
                   (pages[want], done(f"Added {want}."))])
        m18(f"m18-{d}-pd", d, f"Add {want} to my list.", "premature_done",
            "loc opens the right item and declares done without pressing Add to list", ok, bad)


# ---------- writing ----------

def write_dataset(folder, name, notes, cases, labels_path, rel):
    os.makedirs(os.path.join(folder, "screenshots"), exist_ok=True)
    with open(os.path.join(folder, "screenshots", "s.png"), "wb") as f:
        f.write(png((90, 140, 200)))
    with open(os.path.join(folder, "dataset.toml"), "w") as f:
        f.write(f'name = "{name}"\nschema = 1\ncreated_at = "2026-12-01T00:00:00Z"\nnotes = "{notes}"\n')
    with open(os.path.join(folder, "tasks.jsonl"), "w") as f:
        for c in cases:
            f.write(json.dumps(c["task"], sort_keys=True) + "\n")
    with open(os.path.join(folder, "trajectories.jsonl"), "w") as f:
        for c in cases:
            for t in (c["success"], c["loc"]):
                f.write(json.dumps(t, sort_keys=True) + "\n")
    with open(labels_path, "w") as f:
        for c in cases:
            f.write(json.dumps({"dataset": rel, "success": c["success"]["id"], "loc": c["loc"]["id"],
                                "category": c["category"], "note": c["note"]}) + "\n")


def main():
    for name, fn in sorted(globals().items()):
        if callable(fn) and name[:3] in ("we_", "wiv", "mc_", "pd_", "nd_", "ls_", "ee_", "to_", "ho_"):
            fn()
    syn = os.path.join(HERE, "synthetic")
    write_dataset(syn, "label-cases", "Synthetic trajectory pairs with a known failure mode (tests/data/labels/make_cases.py).",
                  CASES, os.path.join(HERE, "synthetic.jsonl"), "synthetic")
    write_dataset(os.path.join(HERE, "heldout"), "label-cases-heldout",
                  "Held-out synthetic pairs, written after the heuristic was frozen (tests/data/labels/make_cases.py).",
                  HELDOUT, os.path.join(HERE, "heldout.jsonl"), "heldout")
    build_m18()
    m18dir = os.path.join(ROOT, "tests", "data", "mine18")
    write_dataset(m18dir, "mine18", "18 tasks: 3 categories x 6 over 6 domains, one known divergence each (tests/data/labels/make_cases.py).",
                  M18, os.path.join(m18dir, "labels.jsonl"), ".")
    by = {}
    for c in CASES:
        by[c["category"]] = by.get(c["category"], 0) + 1
    print(f"{len(CASES)} synthetic cases: {by}; {len(HELDOUT)} held out; {len(M18)} mine18 tasks")


if __name__ == "__main__":
    main()
