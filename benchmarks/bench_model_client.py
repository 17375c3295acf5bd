"""Per-request overhead of the one model client (the openai SDK) against a bare urllib POST,
both against the fake chat server on loopback with no simulated latency, in the same run.

    python benchmarks/bench_model_client.py [--requests 200] [--concurrency 4]

Sequential: milliseconds per request (p50). Concurrent: requests per second with C in flight
(the SDK's AsyncOpenAI on one event loop; urllib in a thread pool, as the agent did before).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from timing import summary, timed

from agentunit_gym.eval.agents.fake_server import FakeChatServer
from agentunit_gym.eval.agents.model_client import ModelClient, OpenAIConfig

MESSAGES = [{"role": "system", "content": "You are an agent." * 20}, {"role": "user", "content": "ls -la /tmp"}]


def _urllib_post(url: str) -> dict[str, Any]:
    body = json.dumps({"model": "m", "messages": MESSAGES, "temperature": 0.0, "max_tokens": 512}).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=30) as resp:
        return dict(json.loads(resp.read()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    out: dict[str, Any] = {}
    with FakeChatServer(lambda body: {"role": "assistant", "content": "Act: bash\n```bash\nls\n```"}) as server:
        url = server.base_url + "/chat/completions"
        client = ModelClient(OpenAIConfig(model="m", base_url=server.base_url))

        async def sdk_sequential() -> list[float]:
            samples = []
            for _ in range(args.requests):
                start = time.perf_counter()
                await client.complete(MESSAGES)
                samples.append((time.perf_counter() - start) * 1000.0)
            return samples

        async def sdk_concurrent() -> float:
            gate = asyncio.Semaphore(args.concurrency)

            async def one() -> None:
                async with gate:
                    await client.complete(MESSAGES)

            start = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(args.requests)))
            return args.requests / (time.perf_counter() - start)

        def urllib_concurrent() -> float:
            start = time.perf_counter()
            with ThreadPoolExecutor(args.concurrency) as pool:
                list(pool.map(lambda _: _urllib_post(url), range(args.requests)))
            return args.requests / (time.perf_counter() - start)

        async def sdk_all() -> tuple[list[float], float]:
            await client.complete(MESSAGES)  # the loop's client made and warm
            return await sdk_sequential(), await sdk_concurrent()

        _urllib_post(url)
        out["urllib_sequential"] = summary(timed(lambda: _urllib_post(url), args.requests))
        sdk_seq, sdk_rps = asyncio.run(sdk_all())
        out["sdk_sequential"] = summary(sdk_seq)
        out["urllib_concurrent_rps"] = urllib_concurrent()
        out["sdk_concurrent_rps"] = sdk_rps
    out["sequential_p50_ratio_sdk_over_urllib"] = out["sdk_sequential"]["p50_ms"] / out["urllib_sequential"]["p50_ms"]
    out["concurrent_rps_ratio_sdk_over_urllib"] = out["sdk_concurrent_rps"] / out["urllib_concurrent_rps"]
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
