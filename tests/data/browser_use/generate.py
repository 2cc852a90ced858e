"""Writes the Browser Use histories under tests/data/browser_use/ with the real
browser-use 0.13.14 Agent, or runs one Agent against any OpenAI-compatible server.

    ~/.cache/rmsweb/venv-browser-use/bin/python tests/data/browser_use/generate.py
        regenerates every run in RUNS: a scripted chat server (below, on loopback)
        plays the model, the judge and the extraction model; the pages in pages/
        are served on loopback. Each run's folder gets Browser Use's own
        history.json, untouched, and the screenshots its agent wrote
        (screenshots/step_N.png, copied from the agent's temporary folder, whose
        absolute path the history keeps).

    .../python generate.py --llm-url http://127.0.0.1:PORT/v1 --model NAME \
        --task TEXT --out DIR [--max-steps N] [--max-tokens N] [--page-root DIR]
        one Agent with Browser Use's own ChatOpenAI client against the given
        server (e.g. `rmsweb serve`); DIR gets history.json and screenshots/.

    .../python generate.py --schema-out agent_output_schema.json
        writes the AgentOutput JSON schema Browser Use sends as response_format.
        With --page-root, that folder is served on loopback and `{pages}` in the
        task text is replaced by its URL.

Chromium: /usr/bin/chromium (or $RMSWEB_CHROMIUM), headless, fresh user-data-dir,
no network beyond loopback (every other host name resolves to nothing). Telemetry and cloud sync are off.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import http.server
import json
import os
import re
import shutil
import socketserver
import sys
import tempfile
import threading
from pathlib import Path

os.environ.setdefault("ANONYMIZED_TELEMETRY", "false")
os.environ.setdefault("BROWSER_USE_CLOUD_SYNC", "false")
os.environ.setdefault("BROWSER_USE_LOGGING_LEVEL", "warning")
os.environ.setdefault("BROWSER_USE_SETUP_LOGGING", "true")
os.environ.setdefault("BROWSER_USE_VERSION_CHECK", "false")

HERE = Path(__file__).resolve().parent
PAGES = HERE / "pages"
PAGE_PORT = 47831
CHAT_PORT = 47832


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class Threaded(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve_pages(root: Path, port: int) -> Threaded:
    handler = functools.partial(QuietHandler, directory=str(root))
    server = Threaded(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# ---------------------------------------------------------------- scripted model


def find(state: str, tag: str, has: str) -> int:
    """The index of the first `<tag` element whose line or text lines below it
    contain `has`."""
    lines = state.splitlines()
    for i, line in enumerate(lines):
        m = re.search(r"\[(\d+)\]<" + tag + r"\b", line)
        if not m:
            continue
        depth = len(line) - len(line.lstrip("\t"))
        text = [line]
        for below in lines[i + 1:]:
            if len(below) - len(below.lstrip("\t")) <= depth or re.search(r"\[\d+\]<", below):
                break
            text.append(below)
        if has in "\n".join(text):
            return int(m.group(1))
    raise RuntimeError(f"scripted model: no <{tag}> element with {has!r}")


def tab_ids(state: str) -> list[str]:
    return re.findall(r"^Tab (\w{4}): ", state, flags=re.M)


def out(goal: str, memory: str, actions: list, **extra) -> dict:
    o = {
        "thinking": f"I should {goal[0].lower()}{goal[1:]}",
        "evaluation_previous_goal": extra.pop("evaluation", "Success: the page is as expected."),
        "memory": memory,
        "next_goal": goal,
        "action": actions,
    }
    o.update(extra)
    return o


def parts_script(step: int, state: str):
    if step == 1:
        return out(
            "Search the page for W-132.",
            "On the parts catalogue.",
            [{"search_page": {"pattern": "W-132"}}],
            evaluation="Start: the catalogue is open.",
            plan_update=["Find W-132 on the page", "Report its colour"],
        )
    if step == 2:
        return out(
            "Extract the colour of W-132.",
            "W-132 is listed on the page.",
            [{"extract": {"query": "colour of part W-132"}}],
            current_plan_item=0,
        )
    return out(
        "Report the colour.",
        "W-132 is red.",
        [{"done": {"text": "W-132 is red", "success": True}}],
        current_plan_item=1,
    )


def login_script(step: int, state: str):
    if step == 1:
        return out(
            "Fill in the user name and password.",
            "On the sign-in form.",
            [
                {"input": {"index": find(state, "input", "name=username"), "text": "alice"}},
                {"input": {"index": find(state, "input", "placeholder=Password"), "text": "s3cret"}},
            ],
            evaluation="Start: the form is open.",
        )
    if step == 2:
        return out(
            "Sign in.",
            "User name and password typed.",
            [{"click": {"index": find(state, "button", "id=signin")}}],
        )
    return out(
        "Report that I am signed in.",
        "The welcome page says I am signed in.",
        [{"done": {"text": "Signed in as alice.", "success": True}}],
    )


def tabs_script(step: int, state: str):
    if step == 1:
        return out(
            "Open the terms.",
            "The terms open in a new tab.",
            [{"click": {"index": find(state, "a", "Read the terms")}}],
            evaluation="Start: the links page is open.",
        )
    ids = tab_ids(state)
    if step == 2:
        return out(
            "Switch to the terms tab.",
            f"Tabs open: {', '.join(ids)}.",
            [{"switch": {"tab_id": ids[-1]}}],
        )
    if step == 3:
        return out(
            "List the terms.",
            "On the terms tab.",
            [{"find_elements": {"selector": "li"}}],
        )
    if step == 4:
        return out(
            "Close the terms tab.",
            "Returns within 30 days; free shipping over 50 euros; prices include VAT.",
            [{"close": {"tab_id": ids[-1]}}],
        )
    return out(
        "Report the return period.",
        "Returns within 30 days.",
        [{"done": {"text": "Returns are accepted within 30 days.", "success": True}}],
    )


def newsletter_script(step: int, state: str):
    if step == 1:
        return out(
            "Scroll down to the end of the newsletter list.",
            "The list is long.",
            [{"scroll": {"down": True, "pages": 10}}],
            evaluation="Start: the newsletter page is open.",
        )
    if step == 2:
        return out(
            "Find the last issue's line.",
            "Scrolled to the bottom.",
            [{"find_text": {"text": "Last issue"}}],
        )
    if step == 3:
        # The Subscribe button is fixed at (40, 40) with size 160x40.
        return out(
            "Click Subscribe at its position.",
            "Last issue: 60.",
            [{"click": {"coordinate_x": 120, "coordinate_y": 60}}],
        )
    if step == 4:
        return out(
            "Check the page title.",
            "Clicked Subscribe.",
            [{"evaluate": {"code": "document.title"}}],
        )
    if step == 5:
        return out(
            "Write down the result.",
            "The title says Subscribed.",
            [{"write_file": {"file_name": "notes.md", "content": "Subscribed; last issue 60.\n"}}],
        )
    return out(
        "Report.",
        "Subscribed; last issue 60.",
        [{"done": {"text": "Subscribed. The last issue is 60.", "success": True}}],
    )


def broken_script(step: int, state: str):
    if step == 1:
        return "this is not JSON at all"
    if step == 2:
        return out(
            "Click the missing order button.",
            "There is no order form on this page.",
            [{"click": {"index": 999}}],
            evaluation="Failure: the last answer was malformed.",
        )
    return out(
        "Give up.",
        "The page has no order button.",
        [{"done": {"text": "I could not find an order button.", "success": False}}],
        evaluation="Failure: index 999 does not exist.",
    )


# task (with {pages} for the page server's URL), script, model name, judge verdict
RUNS = {
    "parts": (
        "Open {pages}/parts.html and find the colour of part W-132.",
        parts_script,
        "scripted-teacher",
        {"verdict": True, "reasoning": "The agent found and reported the colour.", "failure_reason": "",
         "impossible_task": False, "reached_captcha": False},
    ),
    "login": (
        "Go to {pages}/login.html and sign in as alice with password s3cret.",
        login_script,
        "scripted-teacher",
        {"verdict": True, "reasoning": "Signed in.", "failure_reason": "",
         "impossible_task": False, "reached_captcha": False},
    ),
    "tabs": (
        "On {pages}/links.html, read the terms and tell me the return period.",
        tabs_script,
        "scripted-teacher",
        {"verdict": True, "reasoning": "The return period was read from the terms.", "failure_reason": "",
         "impossible_task": False, "reached_captcha": False},
    ),
    "newsletter": (
        "Subscribe on {pages}/long.html and tell me the number of the last issue.",
        newsletter_script,
        # Browser Use offers coordinate clicks to models whose names contain claude-opus-4.
        "scripted-claude-opus-4",
        {"verdict": True, "reasoning": "Subscribed and reported issue 60.", "failure_reason": "",
         "impossible_task": False, "reached_captcha": False},
    ),
    "broken": (
        "Order part W-999 on {pages}/parts.html.",
        broken_script,
        "scripted-teacher",
        {"verdict": False, "reasoning": "There is no way to order on this site.",
         "failure_reason": "The site has no order form.", "impossible_task": True, "reached_captcha": False},
    ),
}


def text_of(message: dict) -> str:
    c = message.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "\n".join(p.get("text", "") for p in c if isinstance(p, dict))
    return ""


class ScriptedChat(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/chat/completions that plays RUNS' scripts."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.reply({"object": "list", "data": [{"id": "scripted", "object": "model"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        messages = body["messages"]
        system = text_of(messages[0]) if messages and messages[0]["role"] == "system" else ""
        states = [text_of(m) for m in messages if m["role"] == "user" and "<step_info>" in text_of(m)]
        user = states[-1] if states else text_of(messages[-1])
        every = "\n".join(text_of(m) for m in messages if m["role"] == "user")
        request = re.search(r"<user_request>\s*(.*?)\s*</user_request>", every, re.S)
        if "expert judge evaluating" in system:
            task = re.search(r"<task>\s*(.*?)\s*</task>", every, re.S).group(1)
            content = json.dumps(self.server.run_for(task)[3])
        elif "expert at extracting" in system:
            part = re.search(r"<query>.*?(W-\d+).*?</query>", user, re.S)
            m = part and re.search(re.escape(part.group(1)) + r" is \w+", user)
            content = m.group(0) if m else "Not found on the page."
        elif "<step_info>" not in text_of(messages[-1]) and "You failed" in text_of(messages[-1]):
            # Browser Use's last call after too many failures: only `done` is allowed.
            content = json.dumps(out("Stop.", "Too many failures.",
                                     [{"done": {"text": "Stopped after failures.", "success": False}}]))
        else:
            step = int(re.search(r"<step_info>Step\s*(\d+)", user).group(1))
            _, script, _, _ = self.server.run_for(request.group(1))
            reply = script(step, user)
            content = reply if isinstance(reply, str) else json.dumps(reply)
        self.reply({
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        })

    def reply(self, obj: dict):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ChatServer(Threaded):
    def __init__(self, runs: dict, pages_url: str):
        super().__init__(("127.0.0.1", CHAT_PORT), ScriptedChat)
        self.by_task = {t.format(pages=pages_url): r for r in runs.values() for t in [r[0]]}

    def run_for(self, task: str):
        for t, r in self.by_task.items():
            if t.strip() == task.strip():
                return r
        raise RuntimeError(f"scripted model: unknown task {task!r}")


# ---------------------------------------------------------------- one agent


def chromium_profile(user_data_dir: str):
    from browser_use import BrowserProfile

    return BrowserProfile(
        executable_path=os.environ.get("RMSWEB_CHROMIUM", "/usr/bin/chromium"),
        headless=True,
        user_data_dir=user_data_dir,
        chromium_sandbox=False,
        enable_default_extensions=False,
        args=[
            "--no-sandbox",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        ],
    )


async def run_agent(task: str, llm_url: str, model: str, out_dir: Path, max_steps: int,
                    max_tokens: int | None = None, **agent_args) -> None:
    from browser_use import Agent, BrowserSession, ChatOpenAI

    profile_dir = tempfile.mkdtemp(prefix="rmsweb-bu-profile-")
    limit = {} if max_tokens is None else {"max_completion_tokens": max_tokens}
    llm = ChatOpenAI(model=model, base_url=llm_url, api_key="local", temperature=0.0, max_retries=0, **limit)
    session = BrowserSession(browser_profile=chromium_profile(profile_dir))
    agent = Agent(task=task, llm=llm, browser_session=session, **agent_args)
    try:
        history = await agent.run(max_steps=max_steps)
    finally:
        await session.kill()
        shutil.rmtree(profile_dir, ignore_errors=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    history.save_to_file(out_dir / "history.json")
    shots = Path(agent.agent_directory) / "screenshots"
    if shots.is_dir():
        dest = out_dir / "screenshots"
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(shots, dest)
    shutil.rmtree(agent.agent_directory, ignore_errors=True)


def regenerate(only: list[str]) -> None:
    pages_url = f"http://127.0.0.1:{PAGE_PORT}"
    page_server = serve_pages(PAGES, PAGE_PORT)
    chat = ChatServer(RUNS, pages_url)
    threading.Thread(target=chat.serve_forever, daemon=True).start()
    try:
        for name, (task, _, model, _) in RUNS.items():
            if only and name not in only:
                continue
            out_dir = HERE / name
            shutil.rmtree(out_dir, ignore_errors=True)
            asyncio.run(run_agent(task.format(pages=pages_url), f"http://127.0.0.1:{CHAT_PORT}/v1",
                                  model, out_dir, max_steps=8, max_failures=2))
            steps = len(json.loads((out_dir / "history.json").read_text())["history"])
            print(f"{name}: {steps} history items")
    finally:
        chat.shutdown()
        page_server.shutdown()


def write_schema(path: Path) -> None:
    """Writes the `AgentOutput` JSON schema Browser Use's ChatOpenAI sends as
    `response_format` (default tools, thinking on), as its schema optimizer makes it."""
    from browser_use.agent.views import AgentOutput
    from browser_use.llm.schema import SchemaOptimizer
    from browser_use.tools.service import Tools

    output = AgentOutput.type_with_custom_actions(Tools().registry.create_action_model())
    schema = SchemaOptimizer.create_optimized_json_schema(output)
    path.write_text(json.dumps(schema, indent=1, ensure_ascii=False) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llm-url")
    ap.add_argument("--model", default="rmsweb")
    ap.add_argument("--task")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--max-steps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int,
                    help="max_completion_tokens of each request (default: Browser Use's, 4096)")
    ap.add_argument("--page-root", type=Path)
    ap.add_argument("--page-port", type=int, default=0)
    ap.add_argument("--system-prompt-file", type=Path,
                    help="the system message to send instead of Browser Use's own")
    ap.add_argument("--schema-out", type=Path,
                    help="write Browser Use's AgentOutput response schema there and exit")
    ap.add_argument("runs", nargs="*", help="regenerate only these runs")
    a = ap.parse_args()
    if a.schema_out:
        write_schema(a.schema_out)
        return
    if not a.llm_url:
        regenerate(a.runs)
        return
    if not (a.task and a.out):
        sys.exit("--llm-url needs --task and --out")
    task = a.task
    server = None
    if a.page_root:
        server = serve_pages(a.page_root, a.page_port)
        task = task.replace("{pages}", f"http://127.0.0.1:{server.server_address[1]}")
    extra = {}
    if a.system_prompt_file:
        extra["override_system_message"] = a.system_prompt_file.read_text()
    try:
        asyncio.run(run_agent(task, a.llm_url, a.model, a.out, a.max_steps, a.max_tokens, max_failures=1,
                              use_judge=False, use_vision=False, enable_planning=False, **extra))
    finally:
        if server:
            server.shutdown()


if __name__ == "__main__":
    main()
