#!/usr/bin/env python3
"""Writes the fixture sources: mock HTML pages of six sites and Browser Use agent
histories (in three layouts) of attempts at one task per site.

    gen.py pages OUT      write OUT/pages/<page>.html (one per distinct screen)
    gen.py histories OUT  write OUT/histories/<task>/{task.json, a*.json, shots/}
                          (needs OUT/pages/<page>.png rendered from the HTML)

Each page is described once (its interactive elements, in order); the same
description gives the HTML that is screenshotted and the serialized element list
(`state_message`) the model saw, so indices in screenshots, element lists and
actions agree. Failures share a prefix with a success of the same task and then
diverge (a wrong click on a similar element, a wrong input value, a premature
done, a loop), the way the miner expects.

Layouts: `v01` (<=0.3.1: model_output.current_state, inline base64 screenshots,
page_id tabs, old action names), `v05` (flat with thinking, screenshot_path,
page_id tabs, old action names), `v08` (flat, screenshot_path, target_id tabs, new
names). All three carry a `state_message`: real pre-0.8 histories do not, but the
fixtures need element lists on every step, and the importer reads the message
whatever the layout.
"""

import base64
import hashlib
import html
import json
import os
import sys

# --------------------------------------------------------------------------- sites

SITES = {
    "recipes": dict(
        name="QuickRecipes", host="www.quickrecipes.test", color="#c0392b",
        nav=[("nav_veg", "Vegetarian", "/c/vegetarian"), ("nav_quick", "Quick & Easy", "/c/quick"),
             ("nav_dessert", "Desserts", "/c/desserts"), ("nav_saved", "Saved", "/saved")],
        search="Search 40,000 recipes"),
    "flights": dict(
        name="SkyFare", host="www.skyfare.test", color="#1f5fa8",
        nav=[("nav_flights", "Flights", "/"), ("nav_hotels", "Hotels", "/hotels"),
             ("nav_cars", "Cars", "/cars"), ("nav_trips", "My trips", "/trips")],
        search=None),
    "shop": dict(
        name="Buyly", host="www.buyly.test", color="#16a085",
        nav=[("nav_men", "Men", "/men"), ("nav_women", "Women", "/women"),
             ("nav_kids", "Kids", "/kids"), ("nav_sale", "Sale", "/sale")],
        search="Search products"),
    "code": dict(
        name="CodeHub", host="www.codehub.test", color="#24292e",
        nav=[("nav_explore", "Explore", "/explore"), ("nav_market", "Marketplace", "/marketplace"),
             ("nav_pulls", "Pull requests", "/pulls"), ("nav_issues_top", "Issues", "/issues")],
        search="Search or jump to..."),
    "mail": dict(
        name="Postbox", host="mail.postbox.test", color="#8e44ad",
        nav=[("nav_inbox", "Inbox (3)", "/inbox"), ("nav_sent", "Sent", "/sent"),
             ("nav_drafts", "Drafts", "/drafts"), ("nav_spam", "Spam", "/spam")],
        search="Search mail"),
    "library": dict(
        name="City Library", host="catalog.citylibrary.test", color="#b9770e",
        nav=[("nav_account", "My Account", "/account"), ("nav_events", "Events", "/events"),
             ("nav_branches", "Branches", "/branches"), ("nav_ebooks", "eBooks", "/ebooks")],
        search="Search the catalog"),
}


def link(key, text, href):
    return ("a", key, text, {"href": href})


def button(key, text, **attrs):
    return ("button", key, text, dict(attrs))


def field(key, placeholder, typ="text", **attrs):
    a = {"type": typ, "placeholder": placeholder}
    a.update(attrs)
    return ("input", key, "", a)


def select(key, label, options):
    return ("select", key, label, {"options": options})


def text(t):
    return ("p", None, t, {})


def heading(t):
    return ("h1", None, t, {})


class Page:
    """One screen of a site: the header (logo, nav, search), the body items, a footer."""

    def __init__(self, pid, site, path, title, body, overlay=False):
        self.pid, self.site, self.path, self.title, self.body = pid, site, path, title, body
        self.overlay = overlay
        s = SITES[site]
        self.url = f"https://{s['host']}{path}"
        items = [link("logo", s["name"], "/")]
        items += [link(k, t, h) for k, t, h in s["nav"]]
        if s["search"]:
            items += [field("search", s["search"], "search", name="q"), button("search_btn", "Search", type="submit")]
        items += list(body)
        items += [link("f_help", "Help", "/help"), link("f_privacy", "Privacy", "/privacy"), link("f_about", "About us", "/about")]
        self.items = items
        self.elements = []
        for tag, key, txt, attrs in items:
            if key is not None:
                self.elements.append(dict(index=len(self.elements) + 1, key=key, tag=tag, text=txt, attrs=attrs))
        self.by_key = {e["key"]: e for e in self.elements}
        assert 10 <= len(self.elements) <= 30, (pid, len(self.elements))

    def idx(self, key):
        return self.by_key[key]["index"]

    # ---- what the model saw

    def serialize(self, style, fill, new_keys):
        out = []
        for tag, key, txt, attrs in self.items:
            if key is None:
                out.append(txt)
                continue
            e = self.by_key[key]
            shown = {k: v for k, v in attrs.items() if k != "options"}
            if key in fill:
                shown["value"] = fill[key]
            if tag == "select":
                shown["value"] = fill.get(key, attrs["options"][0])
            a = "".join(f" {k}={v}" for k, v in shown.items())
            star = "*" if key in new_keys else ""
            if style == "old":
                body = txt if tag != "select" else txt
                if body:
                    out.append(f"{star}[{e['index']}]<{tag}{a}>{body}</{tag}>")
                else:
                    out.append(f"{star}[{e['index']}]<{tag}{a} />")
            else:
                out.append(f"{star}[{e['index']}]<{tag}{a} />")
                if txt:
                    out.append(f"\t{txt}")
                if tag == "select":
                    out.append("\t" + " | ".join(attrs["options"]))
        return "\n".join(out)

    # ---- what the screenshot shows

    def html(self, fill):
        s = SITES[self.site]
        color = s["color"]
        parts = [f"""<!doctype html><html><head><meta charset=utf-8><title>{html.escape(self.title)}</title>
<style>
body{{margin:0;font:13px/1.35 'DejaVu Sans',sans-serif;color:#222;background:#fafafa}}
header{{background:{color};color:#fff;padding:6px 10px;display:flex;gap:10px;align-items:center;flex-wrap:wrap}}
header a{{color:#fff;text-decoration:none}} header a.logo{{font-weight:bold;font-size:16px;margin-right:8px}}
main{{padding:6px 14px}} h1{{font-size:17px;margin:6px 0}} p{{margin:4px 0;color:#444}}
.hl{{position:relative}} .hl>i{{position:absolute;top:-7px;right:-7px;font:bold 9px sans-serif;font-style:normal;color:#fff;background:#e67e22;border-radius:3px;padding:0 2px}}
.hl{{outline:1px dashed #e67e22;outline-offset:1px}}
button{{background:{color};color:#fff;border:0;border-radius:3px;padding:3px 8px;font-size:12px}}
input,select,textarea{{font-size:12px;padding:2px 4px;border:1px solid #999;border-radius:3px}}
.items{{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center;margin:4px 0}}
footer{{padding:4px 14px;color:#777;font-size:11px;display:flex;gap:12px}}
.overlay{{position:fixed;left:120px;top:70px;width:380px;background:#fff;border:2px solid {color};box-shadow:0 4px 18px #0005;padding:10px}}
</style></head><body>"""]

        def render(tag, key, txt, attrs):
            if key is None:
                return f"<{tag}>{html.escape(txt)}</{tag}>"
            e = self.by_key[key]
            label = f"<i>{e['index']}</i>"
            if tag == "a":
                inner = f"<a href='#'>{html.escape(txt)}</a>"
            elif tag == "button":
                inner = f"<button>{html.escape(txt)}</button>"
            elif tag == "input":
                v = html.escape(fill.get(key, ""))
                ph = html.escape(attrs.get("placeholder", ""))
                if attrs.get("type") == "checkbox":
                    inner = f"<input type=checkbox {'checked' if fill.get(key) else ''}> {html.escape(txt)}"
                else:
                    inner = f"<input value='{v}' placeholder='{ph}' size=22>"
            elif tag == "textarea":
                v = html.escape(fill.get(key, ""))
                inner = f"<textarea rows=2 cols=36 placeholder='{html.escape(attrs.get('placeholder', ''))}'>{v}</textarea>"
            elif tag == "select":
                cur = fill.get(key, attrs["options"][0])
                inner = f"{html.escape(txt)} <select><option>{html.escape(cur)}</option></select>"
            else:
                inner = html.escape(txt)
            return f"<span class=hl data-i={e['index']}>{inner}{label}</span>"

        n_head = 1 + len(s["nav"]) + (2 if s["search"] else 0)
        head, body, foot = self.items[:n_head], self.items[n_head:-3], self.items[-3:]
        parts.append("<header>" + "".join(render(*i) for i in head) + "</header>")
        main = []
        run = []
        for it in body:
            if it[1] is None:
                if run:
                    main.append("<div class=items>" + "".join(run) + "</div>")
                    run = []
                main.append(render(*it))
            else:
                run.append(render(*it))
        if run:
            main.append("<div class=items>" + "".join(run) + "</div>")
        if self.overlay:
            # The last body block is a dialog drawn over the page.
            parts.append("<main>" + "".join(main[:-2]) + "</main><div class=overlay>" + "".join(main[-2:]) + "</div>")
        else:
            parts.append("<main>" + "".join(main) + "</main>")
        parts.append("<footer>" + "".join(render(*i) for i in foot) + "</footer>")
        # Element boxes, read back with `chromium --dump-dom` (nothing is drawn).
        parts.append("""<script id=bbox type=application/json></script><script>
const boxes = {};
for (const s of document.querySelectorAll('.hl')) {
  const r = (s.firstElementChild && s.firstElementChild.tagName !== 'I' ? s.firstElementChild : s).getBoundingClientRect();
  boxes[s.dataset.i] = [r.x, r.y, r.width, r.height].map(v => Math.round(v * 10) / 10);
}
document.getElementById('bbox').textContent = JSON.stringify(boxes);
</script></body></html>""")
        return "".join(parts)


PAGES = {}


def page(pid, site, path, title, body, overlay=False):
    PAGES[pid] = Page(pid, site, path, title, body, overlay)
    return PAGES[pid]


# --------------------------------------------------------------------- recipes

page("recipes_home", "recipes", "/", "QuickRecipes - Easy recipes for every day", [
    heading("What's cooking today?"),
    text("Popular this week"),
    link("card_curry", "Weeknight Chicken Curry", "/r/chicken-curry"),
    link("card_pizza", "Classic Margherita Pizza", "/r/margherita"),
    link("card_salmon", "Lemon Garlic Salmon", "/r/lemon-salmon"),
    link("card_brownie", "Fudgy Brownies", "/r/brownies"),
    button("newsletter", "Get the newsletter"),
])
page("recipes_results", "recipes", "/search?q=vegetarian+lasagna", "vegetarian lasagna - QuickRecipes search", [
    heading("Results for \"vegetarian lasagna\" (4)"),
    button("f_rating", "Rating 4.5+"), button("f_time", "Under 1 hour"),
    select("sort", "Sort by", ["Relevance", "Rating", "Newest"]),
    text("Sponsored results are marked."),
    link("r_soup", "Vegetable Lasagna Soup  ★4.8 (312)", "/r/vegetable-lasagna-soup"),
    link("r_spinach", "Spinach & Ricotta Vegetarian Lasagna  ★4.7 (1,204)", "/r/spinach-ricotta-lasagna"),
    link("r_lentil", "Vegan Lentil Lasagna  ★4.3 (88)", "/r/vegan-lentil-lasagna"),
    link("r_rollups", "Vegetarian Lasagna Roll-Ups  ★4.1 (59)", "/r/lasagna-roll-ups"),
    button("more", "Show more results"),
])
page("recipes_spinach", "recipes", "/r/spinach-ricotta-lasagna", "Spinach & Ricotta Vegetarian Lasagna - QuickRecipes", [
    heading("Spinach & Ricotta Vegetarian Lasagna"),
    text("★4.7 · 1,204 ratings · By Dana M."),
    text("Prep 25 min · Cook 50 min · Total 1 hr 15 min · Serves 8"),
    button("save", "Save"), button("print", "Print"), button("jump", "Jump to recipe"),
    select("servings", "Servings", ["8", "4", "12"]),
    text("Ingredients: lasagna noodles, ricotta, fresh spinach, mozzarella, marinara, parmesan, egg, basil."),
    link("reviews", "Read 1,204 reviews", "#reviews"),
])
page("recipes_soup", "recipes", "/r/vegetable-lasagna-soup", "Vegetable Lasagna Soup - QuickRecipes", [
    heading("Vegetable Lasagna Soup"),
    text("★4.8 · 312 ratings · By Priya K."),
    text("Prep 15 min · Cook 30 min · Total 45 min · Serves 6"),
    button("save", "Save"), button("print", "Print"), button("jump", "Jump to recipe"),
    select("servings", "Servings", ["6", "3", "12"]),
    text("All the flavor of lasagna in a bowl: broken noodles simmered in a tomato broth with zucchini and ricotta."),
    link("reviews", "Read 312 reviews", "#reviews"),
])

# --------------------------------------------------------------------- flights

FLIGHT_FORM = [
    heading("Find cheap flights"),
    button("round", "Round trip"), button("oneway", "One way"), button("multi", "Multi-city"),
    field("from", "From (city or airport)"), field("to", "To (city or airport)"),
    field("depart", "Depart (MM/DD/YYYY)"),
    select("pax", "Travelers", ["1 adult", "2 adults", "1 adult, 1 child"]),
    select("cabin", "Cabin", ["Economy", "Premium economy", "Business"]),
    button("go", "Search flights"),
    text("Deals from Boston"),
    link("deal_ny", "Boston → New York from $59", "/deals/bos-nyc"),
]
page("flights_home", "flights", "/", "SkyFare - Cheap flights, hotels and cars", FLIGHT_FORM)


def flight_results(pid, date_label, path_date, rows):
    body = [heading(f"Boston (BOS) → Chicago (ORD) · One way · {date_label} · 1 adult"),
            button("t_cheap", "Cheapest"), button("t_best", "Best"), button("t_fast", "Fastest"),
            select("stops", "Stops", ["Any", "Nonstop only", "1 stop or fewer"]),
            button("edit", "Edit search")]
    for i, (air, times, price) in enumerate(rows):
        body.append(text(f"{air} · {times}"))
        body.append(button(f"sel{i}", f"Select {price}"))
    page(pid, "flights", f"/flights/BOS-ORD/{path_date}?adults=1&type=oneway", f"BOS to ORD, {date_label} - SkyFare", body)


flight_results("flights_mar4", "Wed, Mar 4, 2026", "2026-03-04", [
    ("JetBlue B6 1123", "6:05a – 8:01a · Nonstop", "$89"),
    ("United UA 2231", "7:30a – 9:29a · Nonstop", "$104"),
    ("American AA 1550", "9:15a – 12:40p · 1 stop", "$97"),
    ("Spirit NK 341", "1:10p – 3:05p · Nonstop", "$92"),
])
flight_results("flights_mar14", "Sat, Mar 14, 2026", "2026-03-14", [
    ("United UA 2231", "7:30a – 9:29a · Nonstop", "$112"),
    ("American AA 1550", "9:15a – 12:40p · 1 stop", "$126"),
    ("JetBlue B6 1123", "6:05a – 8:01a · Nonstop", "$131"),
    ("Delta DL 882", "4:45p – 6:52p · Nonstop", "$148"),
])

# --------------------------------------------------------------------- shop

SIZES = ["8", "8.5", "9", "9.5", "10", "10.5", "11"]
page("shop_home", "shop", "/", "Buyly - Shoes, clothing and more", [
    heading("Spring running sale: up to 30% off"),
    link("h_new", "New arrivals", "/new"), link("h_best", "Best sellers", "/best"),
    link("h_run", "Shop running", "/running"),
    button("signin", "Sign in"), link("cart", "Cart (0)", "/cart"),
])
page("shop_results", "shop", "/search?q=trailrunner+x2", "trailrunner x2 - Buyly", [
    heading("3 results for \"trailrunner x2\""),
    select("sort", "Sort", ["Featured", "Price: low to high", "Newest"]),
    link("p_x2", "Trailrunner X2 Men's Running Shoe – $129", "/p/trailrunner-x2"),
    link("p_x2gtx", "Trailrunner X2 GTX Men's Waterproof Running Shoe – $149", "/p/trailrunner-x2-gtx"),
    link("p_x1", "Trailrunner X1 Men's Running Shoe – $99", "/p/trailrunner-x1"),
    link("cart", "Cart (0)", "/cart"),
])
page("shop_men", "shop", "/men", "Men - Buyly", [
    heading("Men"),
    link("m_shoes", "Shoes", "/men/shoes"), link("m_clothing", "Clothing", "/men/clothing"),
    link("m_acc", "Accessories", "/men/accessories"), link("m_new", "New arrivals", "/men/new"),
    link("cart", "Cart (0)", "/cart"),
])
page("shop_shoes", "shop", "/men/shoes", "Men's shoes - Buyly", [
    heading("Men's shoes"),
    link("s_running", "Running", "/men/shoes/running"), link("s_trail", "Trail", "/men/shoes/trail"),
    link("s_casual", "Casual", "/men/shoes/casual"), link("s_boots", "Boots", "/men/shoes/boots"),
    link("cart", "Cart (0)", "/cart"),
])
page("shop_running", "shop", "/men/shoes/running", "Men's running shoes - Buyly", [
    heading("Men's running shoes (24)"),
    select("sort", "Sort", ["Featured", "Price: low to high", "Newest"]),
    link("p_pace", "Pacesetter 5 – $109", "/p/pacesetter-5"),
    link("p_cloud", "Cloudstep Lite – $119", "/p/cloudstep-lite"),
    link("p_x1", "Trailrunner X1 Men's Running Shoe – $99", "/p/trailrunner-x1"),
    link("p_x2", "Trailrunner X2 Men's Running Shoe – $129", "/p/trailrunner-x2"),
    link("cart", "Cart (0)", "/cart"),
])
page("shop_x2", "shop", "/p/trailrunner-x2", "Trailrunner X2 Men's Running Shoe - Buyly", [
    heading("Trailrunner X2 Men's Running Shoe"),
    text("$129.00 · ★4.6 (845) · Color: Slate / Lime"),
    text("Select size (US men's):"),
] + [button(f"size_{s.replace('.', '_')}", s) for s in SIZES] + [
    button("add", "Add to cart"), button("wish", "Add to wishlist"),
    link("cart", "Cart (0)", "/cart"),
])


def shop_added(pid, size):
    page(pid, "shop", "/cart/added", "Added to cart - Buyly", [
        heading("Added to your cart"),
        text(f"Trailrunner X2 Men's Running Shoe · Size {size} · Qty 1 · $129.00"),
        button("checkout", "Proceed to checkout"), button("continue", "Continue shopping"),
        link("cart", "Cart (1)", "/cart"),
    ])


shop_added("shop_added10", "10")
shop_added("shop_added105", "10.5")

# --------------------------------------------------------------------- code

ISSUES_ALL = [
    ("i318", "#318 Add dark mode toggle", "enhancement · opened 2 hours ago by lina-k"),
    ("i317", "#317 Docs: typo in README install section", "documentation · opened 5 hours ago by ttran"),
    ("i316", "#316 Crash when widget width is 0", "bug · opened yesterday by okafor"),
    ("i315", "#315 Support keyboard navigation in Tabs", "enhancement, a11y · opened 2 days ago by mhall"),
    ("i309", "#309 Tooltip flickers on hover in Safari", "bug · opened last week by j-ross"),
]
REPO_TABS = [link("t_code", "Code", "/acme/widgets"), link("t_issues", "Issues 42", "/acme/widgets/issues"),
             link("t_pulls", "Pull requests 7", "/acme/widgets/pulls"), link("t_actions", "Actions", "/acme/widgets/actions")]
page("code_repo", "code", "/acme/widgets", "acme/widgets: Reusable UI widgets", [
    heading("acme / widgets"), *REPO_TABS,
    text("Reusable, accessible UI widgets. ★ 2.1k · 214 forks · MIT license"),
    button("star", "Star"), button("fork", "Fork"),
    link("readme", "README.md", "/acme/widgets/blob/main/README.md"),
])


def issues_page(pid, path, filt, rows, labels_open=False):
    body = [heading("Issues · acme/widgets"), *REPO_TABS[:2],
            field("filter", "Filter issues", "search", value=filt),
            button("labels", "Labels"), select("sortby", "Sort", ["Newest", "Oldest", "Most commented"]),
            button("new_issue", "New issue")]
    if labels_open:
        body += [button("lab_bug", "bug"), button("lab_doc", "documentation"), button("lab_enh", "enhancement")]
    for key, title, meta in rows:
        body += [link(key, title, f"/acme/widgets/issues/{title.split()[0][1:]}"), text(meta)]
    page(pid, "code", path, "Issues · acme/widgets", body)


issues_page("code_issues", "/acme/widgets/issues", "is:issue is:open", ISSUES_ALL)
issues_page("code_issues_labels", "/acme/widgets/issues", "is:issue is:open", ISSUES_ALL[:3], labels_open=True)
issues_page("code_issues_bug", "/acme/widgets/issues?q=is%3Aissue+is%3Aopen+label%3Abug",
            "is:issue is:open label:bug", [r for r in ISSUES_ALL if r[2].startswith("bug")])
page("code_issue316", "code", "/acme/widgets/issues/316", "Crash when widget width is 0 · Issue #316 · acme/widgets", [
    heading("Crash when widget width is 0 #316"), *REPO_TABS[:2],
    text("Open · okafor opened this issue yesterday · 3 comments · Labels: bug"),
    text("Rendering a Slider inside a collapsed panel throws RangeError: width must be positive."),
    button("subscribe", "Subscribe"), button("comment", "Comment"),
])

# --------------------------------------------------------------------- mail

INBOX = [link("m1", "Dana Wu — Lunch on Friday?", "/m/1"), link("m2", "IT Desk — Password expires in 5 days", "/m/2"),
         link("m3", "Maria Lopez — Q3 numbers", "/m/3"), link("m4", "Newsletter — This week in design", "/m/4")]
page("mail_inbox", "mail", "/inbox", "Inbox (3) - Postbox", [
    button("compose", "Compose"), heading("Inbox"), *INBOX, button("older", "Older ›"),
])
page("mail_compose", "mail", "/inbox?compose=new", "New message - Postbox", [
    button("compose", "Compose"), heading("Inbox"), *INBOX,
    heading("New message"),
    field("to", "To", "email"), field("cc", "Cc", "email"), field("subject", "Subject"),
    ("textarea", "body", "", {"placeholder": "Message"}),
    button("send", "Send"), button("discard", "Discard"),
], overlay=True)
page("mail_sent", "mail", "/inbox?sent=1", "Inbox (3) - Postbox", [
    button("compose", "Compose"), heading("Message sent."), link("view_sent", "View message", "/sent/1"),
    *INBOX, button("older", "Older ›"),
])

# --------------------------------------------------------------------- library

page("lib_home", "library", "/", "City Library Catalog", [
    heading("Welcome to the City Library catalog"),
    link("l_new", "New books", "/new"), link("l_staff", "Staff picks", "/picks"), link("l_kids", "Kids", "/kids"),
    button("signin", "Sign in"),
    text("Open today: Central Library 9–8, Eastside 10–6, Northgate 10–6, Westlake 12–8"),
])
page("lib_results", "library", "/search?q=the+left+hand+of+darkness", "Search: the left hand of darkness - City Library", [
    heading("4 results for \"the left hand of darkness\""),
    select("format", "Format", ["All formats", "Book", "eBook", "Audiobook"]),
    link("r_book", "The Left Hand of Darkness — Le Guin, Ursula K. (Book, 1969)", "/item/1001"),
    link("r_ebook", "The Left Hand of Darkness — Le Guin, Ursula K. (eBook, 2012)", "/item/1002"),
    link("r_audio", "The Left Hand of Darkness — Le Guin, Ursula K. (Audiobook, 2016)", "/item/1003"),
    link("r_disp", "The Dispossessed — Le Guin, Ursula K. (Book, 1974)", "/item/1010"),
])
page("lib_item", "library", "/item/1001", "The Left Hand of Darkness (Book) - City Library", [
    heading("The Left Hand of Darkness"),
    text("Le Guin, Ursula K. · Book · 1969 · 304 pages"),
    text("Availability: 2 of 6 copies available · 1 hold"),
    button("hold", "Place hold"), button("shelf", "Add to shelf"), link("author", "More by Le Guin", "/author/le-guin"),
])
BRANCHES = ["Choose a branch", "Central Library", "Eastside Branch", "Northgate Branch", "Westlake Branch"]
page("lib_hold", "library", "/item/1001/hold", "Place hold - City Library", [
    heading("The Left Hand of Darkness"),
    text("Le Guin, Ursula K. · Book · 1969 · 304 pages"),
    button("shelf", "Add to shelf"),
    heading("Place a hold"),
    select("pickup", "Pickup location", BRANCHES),
    button("confirm", "Confirm hold"), button("cancel", "Cancel"),
], overlay=True)


def lib_done(pid, branch):
    page(pid, "library", "/account/holds", "My holds - City Library", [
        heading("Hold placed"),
        text(f"The Left Hand of Darkness (Book) · Pickup at {branch} · Position 2 in queue"),
        link("h_holds", "View all holds", "/account/holds"), button("h_more", "Keep browsing"),
    ])


lib_done("lib_done_central", "Central Library")
lib_done("lib_done_east", "Eastside Branch")

# ----------------------------------------------------------------- trajectories


class Step:
    def __init__(self, page, actions, thinking, evaluation, memory, next_goal, fill=None, results=None, blank=False):
        self.page = PAGES[page] if page else None
        self.actions = actions
        self.thinking, self.evaluation, self.memory, self.next_goal = thinking, evaluation, memory, next_goal
        self.fill = fill or {}
        self.results = results
        self.blank = blank


def S(*a, **k):
    return Step(*a, **k)


TASKS = []


def task(key, task_id, instruction, website, category, layout, source, teacher, attempts):
    TASKS.append(dict(key=key, task_id=task_id, instruction=instruction, website=website, category=category,
                      layout=layout, source=source, teacher=teacher, attempts=attempts))


# Recipes: wrong click on a similar element (the soup is rated higher than the lasagna).
R_Q = "vegetarian lasagna"
r_prefix = [
    S("recipes_home", [("input", {"index": "@search", "text": R_Q}), ("click", {"index": "@search_btn"})],
      "The home page has a search box at the top. I will search for vegetarian lasagna directly.",
      "Success - QuickRecipes home page loaded.", "On QuickRecipes home. Need a vegetarian lasagna with rating >= 4.5 and its total prep time.",
      "Search for 'vegetarian lasagna'."),
]
task("recipes", "quickrecipes-veg-lasagna",
     "Find a vegetarian lasagna recipe rated at least 4.5 stars on QuickRecipes and tell me its total time.",
     "https://www.quickrecipes.test/", "food", "v01", "browser-use@0.1.40", "gpt-4o-2024-08-06", [
         dict(file="a1.json", success=False, steps=r_prefix + [
             S("recipes_results", [("click", {"index": "@r_soup"})],
               "The top result has the highest rating, 4.8 stars, and 'Lasagna' is in its name. I'll open it.",
               "Success - search results for vegetarian lasagna are shown.",
               "Searched 'vegetarian lasagna': 4 results. Top: Vegetable Lasagna Soup 4.8.", "Open the top-rated result."),
             S("recipes_soup", [("extract", {"query": "total time and rating of the recipe"})],
               "This is the recipe page. I'll extract the rating and the total time.",
               "Success - recipe page opened.", "Opened Vegetable Lasagna Soup (4.8 stars).", "Extract the total time."),
             S("recipes_soup", [("done", {"text": "Vegetable Lasagna Soup (4.8 stars) takes 45 minutes in total.", "success": True})],
               "The extraction gave Total 45 min and 4.8 stars, which meets the rating requirement. I can finish.",
               "Success - extracted total time 45 min.", "Vegetable Lasagna Soup: 4.8 stars, total 45 min.",
               "Report the answer.", results="extract:{\"recipe\": \"Vegetable Lasagna Soup\", \"rating\": 4.8, \"total_time\": \"45 min\"}"),
         ]),
         dict(file="a2.json", success=None, steps=r_prefix + [
             S("recipes_results", [("click", {"index": "@r_spinach"})],
               "The first result is a soup, not a lasagna. The second, Spinach & Ricotta Vegetarian Lasagna, is a real lasagna rated 4.7, above 4.5.",
               "Success - search results for vegetarian lasagna are shown.",
               "Searched 'vegetarian lasagna'. Soup (4.8) is not a lasagna; Spinach & Ricotta lasagna has 4.7.",
               "Open Spinach & Ricotta Vegetarian Lasagna."),
             S("recipes_spinach", [("extract", {"query": "total time and rating of the recipe"})],
               "I'm on the lasagna's page. Extract the rating and total time to be sure.",
               "Success - recipe page opened.", "Opened Spinach & Ricotta Vegetarian Lasagna (4.7 stars).", "Extract the total time."),
             S("recipes_spinach", [("done", {"text": "Spinach & Ricotta Vegetarian Lasagna (4.7 stars, 1,204 ratings): total time 1 hr 15 min (25 min prep + 50 min cook).", "success": True})],
               "Rating 4.7 >= 4.5 and total time is 1 hr 15 min. Done.",
               "Success - extracted the times.", "Spinach & Ricotta Vegetarian Lasagna: 4.7 stars, total 1 hr 15 min.",
               "Report the answer.", results="extract:{\"recipe\": \"Spinach & Ricotta Vegetarian Lasagna\", \"rating\": 4.7, \"prep\": \"25 min\", \"cook\": \"50 min\", \"total_time\": \"1 hr 15 min\"}"),
         ]),
     ])

# Flights: a wrong input value (March 4 instead of March 14); attempt 2 is a reflection round.
F_GOAL = "One-way BOS→ORD on Mar 14 2026, 1 adult; report cheapest fare."


def f_prefix(date):
    bad = date != "03/14/2026"
    return [
        S("flights_home", [("click", {"index": "@oneway"})],
          "The search form defaults to round trip. The task asks for one-way, so select One way first.",
          "Success - SkyFare home with the search form loaded.", F_GOAL + " Form is open.", "Select One way."),
        S("flights_home", [("input", {"index": "@from", "text": "BOS"})],
          "One way is selected. Now fill the origin airport.", "Success - One way selected.",
          F_GOAL + " One way selected.", "Type BOS into From.", fill={}),
        S("flights_home", [("input", {"index": "@to", "text": "ORD"})],
          "Origin is set. Fill the destination.", "Success - From is BOS.",
          F_GOAL + " From=BOS.", "Type ORD into To.", fill={"from": "BOS"}),
        S("flights_home", [("input", {"index": "@depart", "text": date})],
          "Now the departure date. The field wants MM/DD/YYYY." + (" March 4... I'll type 03/04/2026." if bad else " March 14, 2026 is 03/14/2026."),
          "Success - To is ORD.", F_GOAL + " From=BOS, To=ORD.", f"Type the date {date}.",
          fill={"from": "BOS", "to": "ORD"}),
        S("flights_home", [("click", {"index": "@go"})],
          "All fields are filled and Travelers already says 1 adult. Search.",
          f"Success - date {date} entered.", F_GOAL + f" Form filled: BOS→ORD, {date}, 1 adult.", "Click Search flights.",
          fill={"from": "BOS", "to": "ORD", "depart": date}),
    ]


REFLECTION = ("Attempt 1 failed: I typed 03/04/2026 into the Depart field, so SkyFare searched Wed, Mar 4 instead of "
              "Sat, Mar 14 and the $89 JetBlue fare I reported was for the wrong day. This time type the date as "
              "03/14/2026 and check that the results header says Mar 14 before reporting the cheapest fare.")
task("flights", "skyfare-bos-ord-mar14",
     "Search SkyFare for one-way flights from Boston (BOS) to Chicago (ORD) on March 14, 2026 for 1 adult and report the cheapest fare.",
     "https://www.skyfare.test/", "travel", "v05", "browser-use@0.5.5", "claude-3-7-sonnet-20250219", [
         dict(file="a1.json", success=False, steps=f_prefix("03/04/2026") + [
             S("flights_mar4", [("click", {"index": "@t_cheap"})],
               "Results are shown. Sort by Cheapest to find the lowest fare.", "Success - results page loaded.",
               F_GOAL + " Results listed for BOS→ORD.", "Sort by cheapest."),
             S("flights_mar4", [("done", {"text": "The cheapest one-way fare from BOS to ORD is $89 (JetBlue B6 1123, 6:05a nonstop).", "success": True})],
               "The cheapest is JetBlue at $89. That answers the task.", "Success - sorted by price.",
               F_GOAL + " Cheapest: JetBlue $89.", "Report the fare."),
         ]),
         dict(file="a2.json", success=None, round=2, reflection=REFLECTION, steps=f_prefix("03/14/2026") + [
             S("flights_mar14", [("click", {"index": "@t_cheap"})],
               "The header says Sat, Mar 14, 2026 — the right day this time. Sort by Cheapest.",
               "Success - results for Mar 14 loaded.", F_GOAL + " Results for Sat Mar 14 listed.", "Sort by cheapest."),
             S("flights_mar14", [("done", {"text": "Cheapest one-way BOS→ORD on Sat, Mar 14, 2026 for 1 adult: $112 (United UA 2231, 7:30a–9:29a, nonstop).", "success": True})],
               "United at $112 is the cheapest on Mar 14. Done.", "Success - sorted by price.",
               F_GOAL + " Cheapest on Mar 14: United $112.", "Report the fare."),
         ]),
     ])

# Shop: wrong click on a similar element (size 10.5); a detour success through the category menus.
SH = "Add Trailrunner X2, men's size 10, to cart."
sh_search = [
    S("shop_home", [("input", {"index": "@search", "text": "trailrunner x2"}), ("click", {"index": "@search_btn"})],
      "I'm on Buyly's home page. Searching for the product name is the quickest way.",
      "Success - Buyly home loaded.", SH + " On home page.", "Search for trailrunner x2."),
    S("shop_results", [("click", {"index": "@p_x2"})],
      "Three results. The plain 'Trailrunner X2 Men's Running Shoe' is the one asked for, not the GTX or the X1.",
      "Success - search results shown.", SH + " Results: X2 $129, X2 GTX $149, X1 $99.", "Open Trailrunner X2."),
]


def sh_finish(size, good, prefix_mem):
    key = "size_" + size.replace(".", "_")
    added = "shop_added10" if size == "10" else "shop_added105"
    return [
        S("shop_x2", [("click", {"index": f"@{key}"})],
          "The product page shows a row of size buttons. " + ("Size 10 is the fifth button." if good else "I'll pick the 10 size button next to 11."),
          "Success - product page opened.", prefix_mem + " On the X2 product page.", f"Select size {size}."),
        S("shop_x2", [("click", {"index": "@add"})],
          f"Size {size} is selected. Add to cart.", f"Success - size {size} selected.",
          prefix_mem + f" Size {size} selected.", "Click Add to cart."),
        S(added, [("done", {"text": f"Added Trailrunner X2 Men's Running Shoe, size {size}, to the cart ($129).", "success": True})],
          f"The confirmation says Size {size}, Qty 1. The task is complete.", "Success - item added to cart.",
          prefix_mem + f" Added X2 size {size} to cart.", "Finish."),
    ]


task("shop", "buyly-trailrunner-x2-size10",
     "Add the Trailrunner X2 running shoes in men's size 10 to the cart on Buyly.",
     "https://www.buyly.test/", "shopping", "v08", "browser-use@0.8.1", "gpt-4.1-2025-04-14", [
         dict(file="a1.json", success=None, steps=sh_search + sh_finish("10", True, SH)),
         dict(file="a2.json", success=False, steps=sh_search + sh_finish("10.5", False, SH)),
         dict(file="a3.json", success=None, steps=[
             S("shop_home", [("click", {"index": "@nav_men"})],
               "I'll browse the men's section to find running shoes.", "Success - Buyly home loaded.",
               SH + " On home page.", "Open Men."),
             S("shop_men", [("click", {"index": "@m_shoes"})], "Men's section. Go to Shoes.",
               "Success - Men page opened.", SH + " In Men.", "Open Shoes."),
             S("shop_shoes", [("click", {"index": "@s_running"})], "Trailrunner X2 is a running shoe. Open Running.",
               "Success - Men's shoes opened.", SH + " In Men > Shoes.", "Open Running."),
             S("shop_running", [("scroll", {"down": True, "pages": 1.0})],
               "The list shows 24 running shoes; X2 might be further down. Scroll to look.",
               "Success - running shoes listed.", SH + " In Men > Shoes > Running (24 items).", "Scroll down to find X2."),
             S("shop_running", [("click", {"index": "@p_x2"})],
               "Trailrunner X2 Men's Running Shoe is listed at $129. Open it.", "Success - scrolled.",
               SH + " Found X2 in running list.", "Open Trailrunner X2."),
         ] + sh_finish("10", True, SH + " Reached X2 via menus.")),
     ])

# Code: a premature done (reports the newest issue without the bug label).
CG = "Newest open issue labeled bug in acme/widgets: title and number."
c_prefix = [
    S("code_repo", [("click", {"index": "@t_issues"})], "This is the repository page. Open the Issues tab.",
      "Success - repository page loaded.", CG + " On repo page.", "Open Issues."),
]
task("code", "codehub-widgets-newest-bug",
     "In the acme/widgets repository on CodeHub, find the most recently opened issue labeled 'bug' and report its title and number.",
     "https://www.codehub.test/acme/widgets", "software", "v08", "browser-use@0.8.1", "gpt-4.1-2025-04-14", [
         dict(file="a1.json", success=None, steps=c_prefix + [
             S("code_issues", [("click", {"index": "@labels"})],
               "The list is sorted by newest but mixes labels. Filter by the bug label first.",
               "Success - issues list opened.", CG + " Issues list open, sorted newest, 42 open.", "Open the Labels menu."),
             S("code_issues_labels", [("click", {"index": "@lab_bug"})], "The label menu is open. Choose 'bug'.",
               "Success - labels menu opened.", CG + " Labels menu open.", "Select the bug label."),
             S("code_issues_bug", [("click", {"index": "@i316"})],
               "Filtered to label:bug, newest first: #316 is the newest. Open it to confirm the label and date.",
               "Success - filtered by label:bug.", CG + " label:bug shows #316 (yesterday) and #309 (last week).", "Open #316."),
             S("code_issue316", [("done", {"text": "The most recently opened bug is #316: \"Crash when widget width is 0\" (opened yesterday by okafor).", "success": True})],
               "Issue #316 is open, labeled bug, opened yesterday. Report it.", "Success - issue #316 opened.",
               CG + " #316 Crash when widget width is 0, label bug.", "Report the issue."),
         ]),
         dict(file="a2.json", success=False, steps=c_prefix + [
             S("code_issues", [("select_dropdown", {"index": "@sortby", "text": "Newest"})],
               "I need the most recent issue, so make sure the list is sorted by Newest.",
               "Success - issues list opened.", CG + " Issues list open, 42 open.", "Sort by Newest."),
             S("code_issues", [("scroll", {"down": True, "pages": 0.5})],
               "The issues are sorted by newest. Let me look over the list.", "Success - sorted by Newest.",
               CG + " Issues list open, sorted newest.", "Scan the list."),
             S("code_issues", [("done", {"text": "The most recent issue is #318: \"Add dark mode toggle\".", "success": True})],
               "The newest issue is #318 Add dark mode toggle, opened 2 hours ago. That's the answer.",
               "Success - scrolled the list.", CG + " Newest issue: #318.", "Report the newest issue."),
         ]),
     ])

# Mail: a loop on Compose with an error result, ending without done.
MG = "Email maria.lopez@example.com, subject 'Q3 report', body given."
BODY = "Hi Maria, the Q3 report draft is ready for review."
m_prefix = [
    S("mail_inbox", [("click", {"index": "@compose"})], "The inbox is open. Start a new message with Compose.",
      "Success - inbox loaded.", MG + " Inbox open.", "Click Compose."),
]
ERR_COVER = "Element with index {i} is not clickable: another element (div.overlay) would receive the click"
task("mail", "postbox-send-q3-report",
     f"Send an email to maria.lopez@example.com with the subject 'Q3 report' and the body '{BODY}'",
     "https://mail.postbox.test/inbox", "productivity", "v08", "browser-use@0.8.1", "qwen2.5-vl-72b-instruct", [
         dict(file="a1.json", success=None, steps=m_prefix + [
             S("mail_compose", [("input", {"index": "@to", "text": "maria.lopez@example.com"})],
               "A New message dialog is open. Fill the To field.", "Success - compose dialog opened.",
               MG + " Compose dialog open.", "Fill To."),
             S("mail_compose", [("input", {"index": "@subject", "text": "Q3 report"})], "To is filled. Now the subject.",
               "Success - To filled.", MG + " To filled.", "Fill Subject.", fill={"to": "maria.lopez@example.com"}),
             S("mail_compose", [("input", {"index": "@body", "text": BODY})], "Subject is set. Type the body.",
               "Success - Subject filled.", MG + " To, Subject filled.", "Fill the body.",
               fill={"to": "maria.lopez@example.com", "subject": "Q3 report"}),
             S("mail_compose", [("click", {"index": "@send"})], "All fields are filled correctly. Send.",
               "Success - body filled.", MG + " To, Subject, body filled.", "Click Send.",
               fill={"to": "maria.lopez@example.com", "subject": "Q3 report", "body": BODY}),
             S("mail_sent", [("done", {"text": "Sent the email to maria.lopez@example.com with subject 'Q3 report'.", "success": True})],
               "The page says Message sent. Done.", "Success - message sent.", MG + " Sent.", "Finish."),
         ]),
         dict(file="a2.json", success=None, steps=m_prefix + [
             S("mail_compose", [("click", {"index": "@compose"})],
               "I don't see a compose form in the list. Maybe the click didn't register; click Compose again.",
               "Unknown - the page looks similar.", MG + " Clicked Compose once.", "Click Compose again."),
             S("mail_compose", [("click", {"index": "@compose"})],
               "The Compose click failed. Try again.", "Failed - click was intercepted.",
               MG + " Compose clicked twice; click blocked.", "Click Compose again.",
               results=[dict(error=ERR_COVER)]),
             S("mail_compose", [("wait", {"seconds": 2})], "The page may still be loading. Wait a moment.",
               "Failed - click was intercepted again.", MG + " Compose blocked 2x.", "Wait, then retry.",
               results=[dict(error=ERR_COVER)]),
             S("mail_compose", [("click", {"index": "@compose"})], "Retry Compose after waiting.",
               "Unknown - waited 2 seconds.", MG + " Compose blocked 2x, waited.", "Click Compose again."),
             S("mail_compose", [("click", {"index": "@compose"})], "Still no form. Click Compose once more.",
               "Failed - click was intercepted.", MG + " Compose blocked 3x.", "Click Compose again.",
               results=[dict(error=ERR_COVER)]),
         ]),
     ])

# Library: a wrong dropdown value (Eastside instead of Central).
LG = "Hold 'The Left Hand of Darkness' (Book) for pickup at Central Library."
l_prefix = [
    S("lib_home", [("input", {"index": "@search", "text": "the left hand of darkness"}), ("click", {"index": "@search_btn"})],
      "The catalog home has a search box. Search for the title.", "Success - catalog home loaded.",
      LG + " On catalog home.", "Search for the title."),
    S("lib_results", [("click", {"index": "@r_book"})],
      "Four results; the print Book edition from 1969 is the one to hold.", "Success - search results shown.",
      LG + " Results: Book, eBook, Audiobook, The Dispossessed.", "Open the Book edition."),
    S("lib_item", [("click", {"index": "@hold"})], "Two of six copies are available. Place a hold.",
      "Success - item page opened.", LG + " On the Book's page, 2 of 6 available.", "Click Place hold."),
]


def l_finish(branch, good):
    done_page = "lib_done_central" if good else "lib_done_east"
    return [
        S("lib_hold", [("select_dropdown", {"index": "@pickup", "text": branch})],
          "The hold dialog asks for a pickup location. " + ("Choose Central Library." if good else "Eastside is listed first after the placeholder; pick the Eastside Branch."),
          "Success - hold dialog opened.", LG + " Hold dialog open.", f"Select {branch}."),
        S("lib_hold", [("click", {"index": "@confirm"})], f"{branch} is selected. Confirm.",
          f"Success - pickup set to {branch}.", LG + f" Pickup = {branch}.", "Confirm hold.", fill={"pickup": branch}),
        S(done_page, [("done", {"text": f"Placed a hold on The Left Hand of Darkness (Book) for pickup at {branch}.", "success": True})],
          "The hold is placed. Done.", "Success - hold placed.", LG + f" Hold placed at {branch}.", "Finish."),
    ]


task("library", "citylibrary-hold-left-hand",
     "Place a hold on 'The Left Hand of Darkness' by Ursula K. Le Guin (print book) for pickup at the Central Library branch.",
     "https://catalog.citylibrary.test/", "reference", "v08", "browser-use@0.8.1", "qwen2.5-vl-72b-instruct", [
         dict(file="a1.json", success=False, steps=l_prefix + l_finish("Eastside Branch", False)),
         dict(file="a2.json", success=None, steps=l_prefix + l_finish("Central Library", True)),
     ])

# ----------------------------------------------------------------- serialization


def resolve(params, page):
    out = {}
    for k, v in params.items():
        if isinstance(v, str) and v.startswith("@"):
            out[k] = page.idx(v[1:])
        else:
            out[k] = v
    return out


OLD_NAMES = {"navigate": "go_to_url", "click": "click_element", "input": "input_text", "extract": "extract_content",
             "select_dropdown": "select_dropdown_option", "scroll": "scroll_down"}
OLD_NAMES_05 = {"navigate": "go_to_url", "click": "click_element_by_index", "input": "input_text",
                "extract": "extract_structured_data", "select_dropdown": "select_dropdown_option", "scroll": "scroll_down"}


def action_json(name, params, layout):
    if layout == "v01":
        n = OLD_NAMES.get(name, name)
        if n == "extract_content":
            params = {"goal": params["query"]}
        if n == "scroll_down":
            params = {"amount": None}
        if n == "done":
            params = {"text": params["text"], "success": params["success"]}
        return {n: params}
    if layout == "v05":
        n = OLD_NAMES_05.get(name, name)
        if n == "scroll_down":
            params = {"amount": None}
        return {n: params}
    return {name: params}


def result_for(name, params, page, extra, layout):
    if name == "done":
        return dict(is_done=True, success=params.get("success"), error=None, extracted_content=params.get("text"))
    if name == "navigate":
        msg = f"🔗  Navigated to {params['url']}"
    elif name == "click":
        e = next(e for e in page.elements if e["index"] == params["index"])
        msg = f"🖱️  Clicked button with index {params['index']}: {e['text']}"
    elif name == "input":
        msg = f"⌨️  Input {params['text']} into index {params['index']}"
    elif name == "extract":
        msg = f"📄  Extracted from page\n: ```json\n{extra}\n```\n"
    elif name == "scroll":
        msg = "🔍  Scrolled down the page by one page"
    elif name == "select_dropdown":
        msg = f"selected option {params['text']} with value ['{params['text']}']"
    elif name == "wait":
        msg = f"🕒  Waiting for {params['seconds']} seconds"
    else:
        msg = f"{name} done"
    r = dict(is_done=False, success=None, error=None, extracted_content=msg)
    if layout == "v08":
        r["long_term_memory"] = msg.splitlines()[0]
    return r


def state_message(t, step_no, step, prev, layout, tab_id):
    p = step.page
    style = "old" if layout == "v01" else "new"
    if p is None:
        elements = "empty page"
        url, title = "about:blank", ""
    else:
        new_keys = set()
        if prev is not None and prev.page is not None and prev.page.url == p.url and prev.page is not p:
            new_keys = {e["key"] for e in p.elements} - {e["key"] for e in prev.page.elements}
        elements = "[Start of page]\n" + p.serialize(style, step.fill, new_keys) + "\n[End of page]"
        url, title = p.url, p.title
    return (f"<agent_state>\n<user_request>\n{t['instruction']}\n</user_request>\n"
            f"<step_info>Step {step_no + 1} of 20 max possible steps</step_info>\n</agent_state>\n"
            f"<browser_state>\nCurrent tab: {tab_id}\nAvailable tabs:\nTab {tab_id}: {url} - {title}\n\n"
            f"Interactive elements:\n{elements}\n</browser_state>")


def bboxes(out_dir, st):
    """Element boxes of a screen, from `pages/<screen>.bbox.json` (written by build.sh)."""
    path = os.path.join(out_dir, "..", "..", "pages", screen_name(st) + ".bbox.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return {int(k): v for k, v in json.load(f).items()}


def history(t, attempt, shots_dir, out_dir):
    layout = t["layout"]
    items = []
    clock = 1767225600.0 + 3600 * len(t["key"]) + 600 * int(attempt["file"][1])
    tab = {"v01": 0, "v05": 0}.get(layout)
    target = "8A3F29C1D0E44B7A9F1E2C3D4B5A6F70"
    prev = None
    for i, st in enumerate(attempt["steps"]):
        p = st.page
        acts = []
        interacted = []
        results = []
        extra_results = st.results if isinstance(st.results, list) else []
        for j, (name, params) in enumerate(st.actions):
            params = resolve(params, p) if p else dict(params)
            acts.append(action_json(name, params, layout))
            el = None
            if p is not None and "index" in params and name in ("click", "input", "select_dropdown"):
                e = next(e for e in p.elements if e["index"] == params["index"])
                attrs = {k: v for k, v in e["attrs"].items() if k != "options"}
                box = bboxes(out_dir, st).get(e["index"])
                el = {"tag_name": e["tag"], "xpath": f"html/body/*[{e['index']}]", "highlight_index": e["index"],
                      "attributes": attrs}
                if box and layout != "v08":
                    x, y, w, h = box
                    el["viewport_coordinates"] = {
                        "top_left": {"x": x, "y": y}, "top_right": {"x": x + w, "y": y},
                        "bottom_left": {"x": x, "y": y + h}, "bottom_right": {"x": x + w, "y": y + h},
                        "center": {"x": x + w / 2, "y": y + h / 2}, "width": w, "height": h}
                if layout == "v08":
                    el = {"node_id": 100 + e["index"], "backend_node_id": 200 + e["index"], "frame_id": None,
                          "node_type": 1, "node_value": "", "node_name": e["tag"].upper(), "attributes": attrs,
                          "x_path": el["xpath"], "element_hash": 10**12 + e["index"],
                          "stable_hash": 2 * 10**12 + e["index"], "ax_name": e["text"] or attrs.get("placeholder")}
                    if box:
                        el["bounds"] = {"x": box[0], "y": box[1], "width": box[2], "height": box[3]}
            interacted.append(el)
            extra = st.results[len("extract:"):] if isinstance(st.results, str) and st.results.startswith("extract:") else None
            r = result_for(name, params, p, extra, layout)
            if j < len(extra_results) and extra_results[j].get("error"):
                idx = params.get("index")
                r = dict(is_done=False, success=None, error=extra_results[j]["error"].format(i=idx), extracted_content=None)
            results.append(r)
        # An extraction result belongs to the step that extracted: move it back.
        if isinstance(st.results, str) and st.results.startswith("extract:") and items:
            extra = st.results[len("extract:"):]
            items[-1]["result"][-1]["extracted_content"] = f"📄  Extracted from page\n: ```json\n{extra}\n```\n"
        url = p.url if p else "about:blank"
        title = p.title if p else ""
        brain = {"evaluation_previous_goal": st.evaluation, "memory": st.memory, "next_goal": st.next_goal}
        if layout == "v01":
            mo = {"current_state": brain, "action": acts}
        else:
            mo = {"thinking": st.thinking, **brain, "action": acts}
        shot_name = screen_name(st)
        if layout == "v08":
            tabs = [{"url": url, "title": title, "target_id": target, "parent_target_id": None}]
        else:
            tabs = [{"page_id": tab, "url": url, "title": title}]
        state = {"tabs": tabs, "interacted_element": interacted, "url": url, "title": title}
        png_rel = f"shots/{shot_name}.png"
        if layout == "v01":
            with open(os.path.join(out_dir, png_rel), "rb") as f:
                state["screenshot"] = base64.b64encode(f.read()).decode()
        else:
            state["screenshot_path"] = png_rel
        start_t = clock
        clock += 4.0 + (i * 7 % 5) + 0.37 * len(st.thinking) / 10
        meta = {"step_start_time": round(start_t, 3), "step_end_time": round(clock, 3), "input_tokens": 2400 + 180 * i,
                "step_number": i + 1}
        item = {"model_output": mo, "result": results, "state": state, "metadata": meta}
        item["state_message"] = state_message(t, i, st, prev, layout, "0" if layout != "v08" else target[-4:])
        items.append(item)
        prev = st
    return {"history": items}


def screen_name(st):
    """A stable file name for what a step's screen shows."""
    base = st.page.pid if st.page else "blank"
    if not st.fill:
        return base
    digest = hashlib.sha1(json.dumps(st.fill, sort_keys=True).encode()).hexdigest()[:8]
    return f"{base}-{digest}"


def screens():
    """Every (page, fill) screen the histories show, with a stable file name."""
    seen = {}
    for t in TASKS:
        for a in t["attempts"]:
            for st in a["steps"]:
                p = st.page
                name = screen_name(st)
                seen[name] = st
    return seen


def write_pages(out):
    os.makedirs(os.path.join(out, "pages"), exist_ok=True)
    for name, st in screens().items():
        doc = st.page.html(st.fill) if st.page else "<!doctype html><html><body style='background:#fff'></body></html>"
        with open(os.path.join(out, "pages", name + ".html"), "w") as f:
            f.write(doc)


def read_bboxes(out):
    """Turns each `pages/<screen>.dom` (from `chromium --dump-dom`) into `<screen>.bbox.json`."""
    import re
    for name in screens():
        dom_path = os.path.join(out, "pages", name + ".dom")
        with open(dom_path) as f:
            m = re.search(r'<script id="bbox" type="application/json">(.*?)</script>', f.read(), re.S)
        if not m or not m.group(1).strip():
            sys.exit(f"no element boxes in {dom_path}")
        with open(os.path.join(out, "pages", name + ".bbox.json"), "w") as f:
            f.write(html.unescape(m.group(1)))


def write_histories(out):
    import shutil
    for t in TASKS:
        d = os.path.join(out, "histories", t["key"])
        os.makedirs(os.path.join(d, "shots"), exist_ok=True)
        for name in screens():
            shutil.copy(os.path.join(out, "pages", name + ".png"), os.path.join(d, "shots", name + ".png"))
        files = {}
        for a in t["attempts"]:
            fs = {}
            if a.get("success") is not None:
                fs["success"] = a["success"]
            if a.get("round"):
                fs["round"] = a["round"]
            if a.get("reflection"):
                fs["reflection"] = a["reflection"]
            if fs:
                files[a["file"]] = fs
            with open(os.path.join(d, a["file"]), "w") as f:
                json.dump(history(t, a, "shots", d), f, ensure_ascii=False, indent=1)
        # Screenshots only the histories of this task need.
        used = set()
        for a in t["attempts"]:
            for st in a["steps"]:
                p = st.page
                used.add(screen_name(st))
        for n in os.listdir(os.path.join(d, "shots")):
            if n[:-4] not in used:
                os.remove(os.path.join(d, "shots", n))
        side = {"task": t["instruction"], "task_id": t["task_id"], "website": t["website"],
                "category": t["category"], "source": t["source"], "teacher": t["teacher"],
                "task_source": f"fixture:{t['key']}", "files": files}
        with open(os.path.join(d, "task.json"), "w") as f:
            json.dump(side, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("pages", "histories", "bboxes"):
        sys.exit(__doc__)
    {"pages": write_pages, "histories": write_histories, "bboxes": read_bboxes}[sys.argv[1]](sys.argv[2])
