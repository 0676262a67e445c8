"""The gateway (``sessionmem serve``): its own cost per turn over the upstream's time, and its RSS.

Three processes, so none takes the others' interpreter lock: the gateway as users run it
(``python -m sessionmem.cli serve``), an upstream OpenAI-compatible server (Starlette on uvicorn,
started from this file with ``--upstream PORT``) that answers each call after ``--upstream-ms``
milliseconds and records how long it held each one, and this script as the client (httpx, one
connection per session).

- **Cost per turn**: the client's wall time of a ``POST /v1/chat/completions`` minus the time the
  upstream held that turn's model call (paired by a tag in the message). What is left is the gateway's
  whole cost: both HTTP hops, litellm, the runner (projection, transcript append, store update), with a
  window large enough that no flush or compaction runs. At 1 session (turns one after another) and at
  100 sessions at once (each sending its turns one after another).
- **RSS**: the gateway's resident set after every block of turns over ``--turns`` turns (default 2,000;
  ``--turns 10000`` for the reported figure) spread over 100 sessions on a 3,000-token window, so every
  session flushes and compacts again and again: a gateway whose memory is bounded shows a flat line.
- **Idle connections reused** (full runs): ``--idle-clients`` clients (default 300) each send a request,
  wait about 5 s (4.99 to 5.01: httpx's and so the official openai client's own keep-alive expiry),
  and send again on the same connection, three times. A server that closes idle connections after 5 s
  (uvicorn's default) loses some of these requests (ReadError, "Server disconnected"); the gateway keeps
  them 75 s and should lose none.

The client uses httpx's default connection limits but for their number (idle connections kept 5 s, as
the official openai client keeps them). Every request that got no reply is counted, by phase.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO_ROOT, footer, header, parser, stats, table, verdict

TARGET_GROWTH = 0.10  # RSS at the end within 10% of RSS after the first fifth of the turns
GATEWAY_KEY = "sk-bench-gateway"


# ---------------------------------------------------------------------------- the upstream (own process)


def upstream_app(delay_s: float) -> Any:
    """An OpenAI-compatible chat endpoint: answers after ``delay_s``; summaries are short, flushes
    silent; usage is the request's size (4 characters a token), as a provider would report it."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    held: dict[str, float] = {}

    async def chat(request: Request) -> JSONResponse:
        start = time.perf_counter()
        body = await request.json()
        messages = body.get("messages") or []
        system = str(messages[0].get("content") or "") if messages else ""
        last = next((str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        if system.startswith("You are a context summarization assistant"):
            text = "## Goal\nKeep talking.\n## Progress\nMany turns."
        elif "Pre-compaction memory flush" in last:
            text = "NO_REPLY"
        else:
            text = "Noted: " + last[:40]
        await asyncio.sleep(delay_s)
        prompt = sum(len(json.dumps(m)) for m in messages) // 4
        reply = {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "bench"),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 8, "total_tokens": prompt + 8},
        }
        if last.startswith("["):  # "[tag] ...": the bench pairs this call with the client's turn
            held[last.split("]", 1)[0][1:]] = time.perf_counter() - start
        return JSONResponse(reply)

    async def durations(request: Request) -> JSONResponse:
        taken = dict(held)
        held.clear()
        return JSONResponse(taken)

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/held", durations, methods=["GET"]),
        ]
    )


def run_upstream(port: int, delay_ms: float) -> None:
    import uvicorn

    uvicorn.run(upstream_app(delay_ms / 1000), host="127.0.0.1", port=port, log_level="warning")


# ---------------------------------------------------------------------------- the gateway (own process)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(command: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(command, env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)


def wait_ready(url: str, headers: dict[str, str], proc: subprocess.Popen[bytes]) -> None:
    import httpx

    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit(f"{url}: the process exited with status {proc.returncode}")
        try:
            if httpx.get(url, headers=headers, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} did not answer")


def gateway(root: Path, upstream: int, context_tokens: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    config = {
        "agents": {
            "defaults": {
                "model": "openai/bench-model",
                "contextTokens": context_tokens,
                "loadDailyLogs": False,
                "memorySearch": {"provider": "none"},
                "compaction": {"postIndexSync": "off"},
            }
        },
        "session": {"store": "sqlite"},
    }
    (root / "config.json").write_text(json.dumps(config), encoding="utf-8")
    env = {**os.environ, "SESSIONMEM_API_KEY": GATEWAY_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = start(
        [
            sys.executable,
            "-m",
            "sessionmem.cli",
            "--config",
            str(root / "config.json"),
            "--state-dir",
            str(root / "state"),
            "serve",
            "--port",
            str(port),
            "--api-base",
            f"http://127.0.0.1:{upstream}/v1",
            "--api-key",
            "sk-upstream",
        ],
        env,
    )
    url = f"http://127.0.0.1:{port}"
    wait_ready(f"{url}/v1/models", {"authorization": f"Bearer {GATEWAY_KEY}"}, proc)
    return proc, url


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ---------------------------------------------------------------------------- the client


# "<phase>: <what>" of each request that got no reply (the run goes on; printed at the end)
failures: list[str] = []


async def session_turns(
    client: Any, url: str, session: int, turns: int, latencies: dict[str, float], run: str
) -> None:
    import httpx

    headers = {
        "authorization": f"Bearer {GATEWAY_KEY}",
        "x-session-key": f"agent:main:bench:direct:{run.split('.')[0]}-{session}",
    }
    for turn in range(turns):
        tag = f"{run}-{session}-{turn}"
        body = {
            "model": "main",
            "messages": [
                {"role": "user", "content": f"[{tag}] turn {turn}: tell me about the rollout plan."}
            ],
        }
        start = time.perf_counter()
        try:
            response = await client.post(f"{url}/v1/chat/completions", json=body, headers=headers)
        except httpx.TransportError as exc:  # counted and reported, never paired with an upstream time
            failures.append(f"{run.split('.')[0]}: {type(exc).__name__}: {exc}")
            continue
        if response.status_code != 200:
            failures.append(f"{run.split('.')[0]}: HTTP {response.status_code}: {response.text[:200]}")
            continue
        latencies[tag] = time.perf_counter() - start


async def drive(url: str, sessions: int, turns: int, run: str) -> dict[str, float]:
    import httpx

    latencies: dict[str, float] = {}
    limits = httpx.Limits(max_connections=sessions + 10)  # idle ones kept 5 s, as the openai client does
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        await asyncio.gather(*(session_turns(client, url, s, turns, latencies, run) for s in range(sessions)))
    return latencies


async def idle_reuse(url: str, clients: int, rounds: int = 3) -> tuple[int, int]:
    """(requests sent, requests lost) of ``clients`` connections each reused ``rounds`` times after
    about 5 s idle (see the module docstring)."""
    import httpx

    sent = lost = 0
    headers = {"authorization": f"Bearer {GATEWAY_KEY}"}

    async def one(rng: random.Random) -> None:
        nonlocal sent, lost
        async with httpx.AsyncClient(timeout=60) as client:  # httpx's defaults: idle connections kept 5 s
            for at in range(rounds + 1):
                if at:
                    await asyncio.sleep(rng.uniform(4.99, 5.01))
                sent += 1
                try:
                    (await client.get(f"{url}/v1/models", headers=headers)).raise_for_status()
                except httpx.HTTPError as exc:
                    lost += 1
                    failures.append(f"idle: {type(exc).__name__}: {exc}")

    await asyncio.gather(*(one(random.Random(seed)) for seed in range(clients)))
    return sent, lost


def held(upstream: int) -> dict[str, float]:
    import httpx

    return dict(httpx.get(f"http://127.0.0.1:{upstream}/held", timeout=10).json())


def cost(url: str, upstream: int, sessions: int, turns: int, run: str) -> tuple[list[float], float]:
    """(gateway cost per turn in ms, median upstream time in ms) of ``sessions`` x ``turns`` turns."""
    held(upstream)  # clear
    latencies = asyncio.run(drive(url, sessions, turns, run))
    upstream_s = held(upstream)
    costs = [(latencies[tag] - upstream_s[tag]) * 1000 for tag in latencies if tag in upstream_s]
    return costs, stats([v * 1000 for v in upstream_s.values()]).p50


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--turns", type=int, default=2_000, help="turns of the RSS run (default 2,000; 10,000 reported)"
    )
    p.add_argument(
        "--upstream-ms", type=float, default=20.0, help="the upstream's time per call (default 20)"
    )
    p.add_argument(
        "--idle-clients",
        type=int,
        help="clients reusing a connection idle about 5 s (default 300; in --smoke and --quick runs none)",
    )
    p.add_argument("--upstream", type=int, metavar="PORT", help=argparse_hidden())
    args = p.parse_args()
    if args.upstream:
        run_upstream(args.upstream, args.upstream_ms)
        return
    quick = args.quick
    single_turns, many_sessions, many_turns = (
        (5, 5, 2) if args.smoke else (20, 20, 3) if quick else (200, 100, 10)
    )
    rss_turns = 20 if args.smoke else 300 if quick else args.turns
    header("Gateway: its own cost per turn, and RSS over many turns (bench_serve.py)", args)
    upstream_port = free_port()
    upstream = start(
        [sys.executable, __file__, "--upstream", str(upstream_port), "--upstream-ms", str(args.upstream_ms)]
    )
    procs = [upstream]
    try:
        wait_ready(f"http://127.0.0.1:{upstream_port}/held", {}, upstream)
        with tempfile.TemporaryDirectory(prefix="bench-serve-", ignore_cleanup_errors=True) as tmp:
            root = Path(tmp)
            (root / "cost").mkdir()
            gw, url = gateway(root / "cost", upstream_port, 1_000_000)
            procs.append(gw)
            idle_clients = args.idle_clients
            if idle_clients is None:
                idle_clients = 0 if args.smoke or quick else 300
            idle = asyncio.run(idle_reuse(url, idle_clients)) if idle_clients else None  # a fresh gateway
            cost(url, upstream_port, 4, 3, "warm")  # litellm imported, runner opened, connections made
            rows = []
            for sessions, turns in ((1, single_turns), (many_sessions, many_turns)):
                costs, upstream_p50 = cost(url, upstream_port, sessions, turns, f"c{sessions}")
                s = stats(costs)
                rows.append(
                    [f"{sessions}", f"{s.n:,}", f"{upstream_p50:.1f}", f"{s.p50:.2f}", f"{s.p95:.2f}"]
                )
            gw.terminate()
            gw.wait(60)
            print(
                f"Upstream answers each call after {args.upstream_ms:g} ms; one model call per turn "
                "(a window of "
                "1,000,000 tokens: no flush, no compaction); session.store sqlite; cost = the client's time "
                "minus the upstream's time for that call.\n"
            )
            print(
                table(
                    ["sessions at once", "turns", "upstream p50 (ms)", "gateway cost p50 (ms)", "p95 (ms)"],
                    rows,
                )
            )
            if idle is not None:
                print(
                    f"\nIdle connections reused: {idle_clients} clients, each reusing its connection after "
                    f"4.99-5.01 s idle (httpx's own expiry: 5 s), 3 times: {idle[0]:,} requests, "
                    f"{idle[1]:,} lost.\n"
                )
            (root / "rss").mkdir()
            gw, url = gateway(root / "rss", upstream_port, 3_000)
            procs.append(gw)
            sessions = 100
            per_block = max(1, rss_turns // sessions // 10)
            samples: list[tuple[int, float]] = []
            done = 0
            while done < rss_turns:
                asyncio.run(drive(url, sessions, per_block, f"rss.{done}"))  # the same sessions each block
                done += sessions * per_block
                samples.append((done, rss_mb(gw.pid)))
            gw.terminate()
            gw.wait(60)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(60)
    print(
        f"\nRSS of the gateway process: {sessions} sessions, a 3,000-token window (each session flushes and "
        f"compacts every few turns), {done:,} turns.\n"
    )
    print(
        table(["turns", *[f"{n:,}" for n, _ in samples]], [["RSS (MB)", *[f"{mb:.1f}" for _, mb in samples]]])
    )
    base = samples[max(0, len(samples) // 5 - 1)][1]
    growth = (samples[-1][1] - base) / base
    print(
        f"\nRSS growth after the first fifth: {growth:+.1%} "
        f"(target <= {TARGET_GROWTH:.0%}: {verdict(growth, TARGET_GROWTH)})"
    )
    if failures:
        phases = sorted({f.split(":", 1)[0] for f in failures})
        by_phase = ", ".join(f"{sum(f.startswith(p + ':') for f in failures)} in {p}" for p in phases)
        print(f"\n{len(failures):,} requests got no reply ({by_phase}); the first: {failures[0]}")
    else:
        print("\nEvery request got a reply.")
    footer()


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
