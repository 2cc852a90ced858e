#!/usr/bin/env python3
"""Writes the hostile corpus under tests/data/hostile/ (committed; rerun to refresh).

Seeds for the fuzz targets and inputs of the hostile tests: terminal-injection
payloads, action-parser candidates, Browser Use histories with wrong parameters,
duplicate keys and a forged 20000x20000 PNG, JSON Lines files with torn and
unterminated tails, reward groups and reward cases. Every file is small; the large
inputs (34 MiB texts, 1 MiB candidates) are made by the tests themselves.

Usage: python3 scripts/hostile/make_corpus.py
"""
import base64
import json
import os
import struct
import zlib

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "hostile")

# Terminal-injection payloads: what an attacker would hide in a title, a file name,
# an attribute key or an error-provoking value.
PAYLOADS = {
    "osc0_title": "\x1b]0;pwned title\x07",
    "osc2_title_st": "\x1b]2;pwned\x1b\\",
    "osc52_clipboard": "\x1b]52;c;cm0gLXJmIH4=\x07",
    "osc8_link": "\x1b]8;;https://evil.test\x1b\\click\x1b]8;;\x1b\\",
    "csi_clear": "\x1b[2J\x1b[H",
    "csi_color": "\x1b[31mred\x1b[0m",
    "dcs": "\x1bP+q544e\x1b\\",
    "c1_csi": "\u009b2J",
    "c1_osc": "\u009d0;c1 title\u009c",
    "bel": "\x07\x07",
    "backspace_cr": "safe\x08\x08\x08\x08evil\rover",
    "esc_reset": "\x1bc",
    "bidi_override": "abc\u202edcba",
    "nul_del": "a\x00b\x7fc",
}


def write(rel, data):
    path = os.path.join(ROOT, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(path, mode) as f:
        f.write(data)


def dumps(v):
    # ensure_ascii: the files themselves hold no raw control bytes (safe to cat).
    return json.dumps(v, ensure_ascii=True)


def png_header_only(width, height):
    """A valid PNG signature and IHDR for width x height with one tiny IDAT: its
    header says 400 Mpx while the file is a few dozen bytes."""

    def chunk(kind, body):
        c = struct.pack(">I", len(body)) + kind + body
        return c + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 16)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def tiny_png():
    raw = b"\x00" + b"\x80\x80\x80" * 2
    ihdr = struct.pack(">IIBBBBB", 2, 1, 8, 2, 0, 0, 0)

    def chunk(kind, body):
        c = struct.pack(">I", len(body)) + kind + body
        return c + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def item(action, url="https://shop.test/", title="Shop", **state):
    st = {"url": url, "title": title, "tabs": [{"page_id": 0, "url": url, "title": title}]}
    st.update(state)
    return {
        "model_output": {"thinking": "t", "memory": "m", "next_goal": "g", "action": [action]},
        "result": [{"is_done": "done" in action, "success": True if "done" in action else None}],
        "state": st,
        "metadata": {"step_start_time": 1.0, "step_end_time": 2.0},
    }


def history(*actions, **state):
    return {"history": [item(a, **state) for a in actions]}


DONE = {"done": {"text": "finished", "success": True}}


def browser_use():
    good = history({"click_element_by_index": {"index": 1}}, DONE)
    write("browser_use/ok_base.json", dumps(good))
    write("browser_use/ok_index_string.json", dumps(history({"click": {"index": "3"}}, DONE)))
    write("browser_use/ok_coordinates.json",
          dumps(history({"click": {"coordinate_x": 10, "coordinate_y": 20}}, DONE)))
    bad = {
        "click_index_null": {"click": {"index": None}},
        "click_index_nan": {"click": {"index": "NaN"}},
        "click_index_missing": {"click": {}},
        "click_index_negative": {"click": {"index": -4}},
        "click_index_overflow": {"click": {"index": 2**32 + 3}},
        "navigate_url_number": {"navigate": {"url": 12}},
        "go_to_url_missing": {"go_to_url": {}},
        "input_text_missing": {"input_text": {"index": 2}},
        "switch_tab_list": {"switch_tab": {"page_id": [1]}},
    }
    for name, action in bad.items():
        write(f"browser_use/bad_{name}.json", dumps(history(action, DONE)))
    # Duplicate keys: written by hand, json.dumps cannot.
    write("browser_use/bad_duplicate_keys.json",
          '{"history": [{"model_output": {"action": [{"click": {"index": 1, "index": 2}}]}, '
          '"result": [], "state": {"url": "https://a.test"}}]}')
    write("browser_use/bad_duplicate_top.json",
          '{"history": [], "history": [{"model_output": null, "result": [], "state": {}}]}')
    big = base64.b64encode(png_header_only(20000, 20000)).decode()
    write("browser_use/bad_png_20000x20000.json",
          dumps(history({"click": {"index": 1}}, DONE, screenshot=big)))
    write("browser_use/ok_inline_png.json",
          dumps(history({"click": {"index": 1}}, DONE, screenshot=base64.b64encode(tiny_png()).decode())))
    # Payloads in fields that are imported (and shown later): must import, and every
    # output must stay clean.
    p = PAYLOADS
    write("browser_use/ok_payloads_in_fields.json", dumps({"history": [
        item({"click": {"index": 1}}, url="https://a.test/" + p["osc0_title"],
             title=p["osc52_clipboard"] + "Shop",
             interacted_element=[{"highlight_index": 1, "tag_name": "button",
                                  "attributes": {p["osc0_title"] + "key": p["csi_clear"]}}]),
        item({"done": {"text": p["c1_osc"] + "answer" + p["bel"], "success": True}}),
    ]}))
    write("browser_use/bad_not_json.json", "{\"history\": [\x1b]0;x\x07")
    write("browser_use/bad_truncated.json", dumps(good)[:-7])


def parse_seeds():
    seeds = {
        "browser_use": '{"thinking": "t", "action": [{"click": {"index": 12}}]}',
        "fenced": 'Next:\n```json\n{"action": [{"go_to_url": {"url": "https://a.test/{x}"}}]}\n```',
        "canonical": '{"actions": [{"name": "input", "params": {"index": 5, "text": "a"}}]}',
        "short_chain": 'input(5, "alice"); click(6)',
        "kwargs": "scroll(down=False, pages=2.5)",
        "unclosed": '{"action": [{"click": {"index": 12}}',
        "braces": "{" * 64,
        "calls": "click(" * 64,
        "nested": '{"a":' * 64,
        "keys": '{"{' * 64,
        "bracket_args": "click({" * 64,
        "quotes": "input(1, '" * 64,
        "payload": '{"action": [{"done": {"text": "' + PAYLOADS["osc52_clipboard"].replace("\x1b", "\\u001b").replace("\x07", "\\u0007") + '"}}]}',
        "raw_payload_prose": "I will " + PAYLOADS["osc0_title"] + " click(3)",
        "multibyte": "Ich klicke „Weiter“ → {\"action\": [{\"click\": {\"index\": 2}}]} ✓",
    }
    for name, text in seeds.items():
        write(f"parse/{name}.txt", text.encode("utf-8"))


def jsonl():
    rec = dumps({"task_id": "t1", "instruction": "buy"})
    write("jsonl/torn_tail.jsonl", rec + "\n" + rec[:-5])
    write("jsonl/unterminated.jsonl", rec + "\n" + rec)
    write("jsonl/blank_and_crlf.jsonl", rec + "\r\n\r\n  \n" + rec + "\r\n")
    write("jsonl/binary.jsonl", (rec + "\n").encode() + b"\xff\xfe\x00\x1b]0;x\x07\n" + (rec + "\n").encode())
    write("jsonl/duplicate_keys.jsonl", '{"task_id": "t1", "instruction": "a", "instruction": "b"}\n')
    write("jsonl/payload_field.jsonl",
          dumps({"task_id": "t1\u001b]0;x\u0007", "instruction": PAYLOADS["osc52_clipboard"]}) + "\n")
    write("jsonl/raw_escape.jsonl", ('{"task_id": "t1", "instruction": "' + "\x1b]0;raw\x07" + '"}\n'))
    write("jsonl/schema2.jsonl", '{"schema": 2, "task_id": "t1", "instruction": "a"}\n')
    write("jsonl/deep.jsonl", "[" * 5000 + "]" * 5000 + "\n")


def groups():
    write("groups/ok.jsonl", "\n".join(dumps(g) for g in [
        {"group": "a", "rewards": [1.0, 0.0, 0.0, 0.0]},
        {"group": "b", "rewards": [0.3, 0.3]},
        {"group": "c", "rewards": [0.0, 0.3, 0.0, 0.3]},
    ]) + "\n")
    write("groups/huge_rewards.jsonl", dumps({"group": "h", "rewards": [1e308, -1e308, 1e308]}) + "\n"
          + dumps({"group": "ok", "rewards": [1.0, 0.0]}) + "\n")
    write("groups/non_utf8.jsonl", b'{"group": "a", "rewards": [1, 0]}\n\xff\xfe\n{"group": "b", "rewards": [1, 0]}\n')
    write("groups/trailing_text.jsonl", '{"group": "a", "rewards": [1, 0]} {"group": "b", "rewards": [1, 0]}\n')
    write("groups/duplicate_keys.jsonl", '{"group": "a", "rewards": [0, 0], "rewards": [1, 0]}\n')
    write("groups/payload_group.jsonl", dumps({"group": PAYLOADS["c1_osc"], "rewards": "\u009b2J"}) + "\n")
    write("groups/empty_and_strings.jsonl", '{"group": 1, "rewards": []}\n{"group": 2, "rewards": ["1"]}\n')


def cases():
    one = dumps({"target": {"name": "click", "params": {"index": 1}}, "candidate": "click(1)"})
    write("cases/two_cases_one_line.jsonl", one + " " + one + "\n" + one + "\n")
    write("cases/payload_candidate.jsonl",
          dumps({"target": {"name": "click", "params": {"index": 1}},
                 "candidate": "{\"action\": [{\"click\": {\"index\": \"" + PAYLOADS["osc0_title"] + "\"}}]}"}) + "\n"
          + dumps({"target": {"name": PAYLOADS["osc52_clipboard"]}, "candidat": 1}) + "\n")
    write("cases/duplicate_keys.jsonl",
          '{"target": {"name": "go_back"}, "candidate": "click(1)", "candidate": "go_back()"}\n')


def main():
    write("payloads.json", json.dumps(PAYLOADS, ensure_ascii=True, indent=1) + "\n")
    browser_use()
    parse_seeds()
    jsonl()
    groups()
    cases()


if __name__ == "__main__":
    main()
