"""The web application: one Starlette app, server-rendered Jinja2 pages, htmx swaps.

Every view has a stable URL (paste it in a chat). A page is the whole document; with
``?fragment=1`` only its ``<main>`` content, which htmx fetches again when the
server-sent event stream (``/events``) says the cluster changed. Read-only: only GET
routes exist.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any, Protocol, TypeVar, cast

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from trainmaster.ui._datasets import dataset_infos
from trainmaster.ui._jobs import find_job, job_events, job_info, job_rows, nodes_ran_on
from trainmaster.ui._look import ASSETS, environment
from trainmaster.ui._queues import queue_fairness_view, queue_infos
from trainmaster.ui._topology import build_topology
from trainmaster.ui._why import Counterfactuals, pending_gangs
from trainmaster.ui._world import World

T = TypeVar("T")
DEBOUNCE = 0.3
"""Seconds to gather a burst of watch events into one update (well inside the ~2 s the
views promise)."""
KEEPALIVE = 15.0
MODEL_TTL = 10.0
"""Seconds a view's model is reused while nothing changed (ages move on after it)."""
PENDING_LIMIT = 100
"""Pending gangs shown on the why-pending page, each placed now (the first the scheduler
will try)."""
COUNTERFACTUALS = 10
"""Of those, the first get the counterfactual search too."""


class Source(Protocol):
    """What the app reads: a Store (live) or a fixed world (bench, tests)."""

    version: int

    def world(self) -> World: ...

    async def wait_change(self, seen: int, timeout: float) -> int: ...


class FixedSource:
    """A world that never changes."""

    def __init__(self, world: World) -> None:
        self._world = world
        self.version = 1

    def world(self) -> World:
        return self._world

    async def wait_change(self, seen: int, timeout: float) -> int:
        await asyncio.sleep(timeout)
        return self.version


class Views:
    def __init__(self, source: Source) -> None:
        self.source = source
        self.env = environment()
        self._cached: tuple[int, World] | None = None
        self._models: dict[str, tuple[int, float, Any]] = {}
        self._cf: Counterfactuals | None = None
        self._cf_lock = threading.Lock()

    def counterfactuals(self, world: World) -> Counterfactuals:
        """One scheduler state for the app's life, brought to each newer world by its
        changes (``Counterfactuals.advance``): O(change) after the first build."""
        with self._cf_lock:
            if self._cf is None:
                self._cf = Counterfactuals(world)
            else:
                self._cf.advance(world)
            return self._cf

    def warm(self) -> threading.Thread:
        """Build what the first visit of a view would otherwise wait for (the scheduler
        state of why pending) in a thread, before anyone asks. The world is taken here,
        on the caller's (the event loop's) thread, as every view takes it."""
        thread = threading.Thread(target=self.counterfactuals, args=(self.world(),),
                                  name="ui-warm", daemon=True)
        thread.start()
        return thread

    def world(self) -> World:
        version = self.source.version
        if self._cached is None or self._cached[0] != version:
            self._cached = (version, self.source.world())
        world = self._cached[1]
        world.now = datetime.now(world.now.tzinfo)
        return world

    async def model(self, request: Request, name: str, build: Callable[[World], T]) -> T:
        """``build(world)``, once per cluster version, in a thread: a large view's model
        must not hold up the event loop (the live streams, other pages). Its CPU time is
        added to the request's (``Server-Timing``)."""
        version = self.source.version
        cached = self._models.get(name)
        if cached is not None and cached[0] == version and \
                time.monotonic() - cached[1] < MODEL_TTL:
            return cast(T, cached[2])
        world = self.world()

        def timed_build() -> tuple[T, float]:
            started = time.thread_time()
            return build(world), time.thread_time() - started

        value, cpu = await asyncio.to_thread(timed_build)
        request.state.cpu = getattr(request.state, "cpu", 0.0) + cpu
        self._models[name] = (version, time.monotonic(), value)
        return value

    def page(self, request: Request, template: str, title: str, **context: Any) -> Response:
        fragment = request.query_params.get("fragment") == "1"
        started = time.thread_time()
        body = self.env.get_template(template).render(
            fragment=fragment, title=title, path=request.url.path,
            version=self.source.version, **context)
        request.state.cpu = getattr(request.state, "cpu", 0.0) + time.thread_time() - started
        return HTMLResponse(body)

    async def root(self, request: Request) -> Response:
        return RedirectResponse("/topology", status_code=307)

    async def topology(self, request: Request) -> Response:
        topo = await self.model(request, "topology", build_topology)
        return self.page(request, "topology.html", "Topology", topo=topo)

    async def leaf(self, request: Request) -> Response:
        topo = await self.model(request, "topology", build_topology)
        name = request.path_params["leaf"]
        if name not in topo.cells:
            return self._missing(f"no switch {name} at the lowest topology level")
        spine = next((s for s, leaves in topo.leaves.items()
                      if any(r.name == name for r in leaves)), "-")
        return self.page(request, "leaf.html", f"Leaf {name}", topo=topo, leaf=name,
                         spine=spine, cells=topo.cells[name])

    async def jobs(self, request: Request) -> Response:
        jobs = await self.model(request, "jobs", job_rows)
        return self.page(request, "jobs.html", "Jobs", jobs=jobs)

    async def job(self, request: Request) -> Response:
        world = self.world()
        ns, name = request.path_params["namespace"], request.path_params["name"]
        tj = find_job(world, ns, name)
        if tj is None:
            return self._missing(f"no TrainingJob {ns}/{name}")
        return self.page(request, "job.html", f"Job {ns}/{name}", job=job_info(tj, world),
                         events=job_events(world.events, ns, name),
                         ran_on=nodes_ran_on(tj, world))

    async def queues(self, request: Request) -> Response:
        queues = await self.model(request, "queues", queue_infos)
        fairness = await self.model(request, "fairness", queue_fairness_view)
        return self.page(request, "queues.html", "Queues", queues=queues, fairness=fairness)

    async def pending(self, request: Request) -> Response:
        """Reasons and placement now; each of the first gangs' counterfactual is fetched
        by the page on its own (``/pending/NS/NAME/counterfactual``), so the table paints
        before the searches end."""
        cf = await self.model(request, "cf", self.counterfactuals)
        whys = await self.model(request, "pending", lambda world: [
            cf.explain_now(p) for p in pending_gangs(world)[:PENDING_LIMIT]])
        return self.page(request, "pending.html", "Why pending", whys=whys,
                         limit=PENDING_LIMIT, searched=COUNTERFACTUALS)

    async def counterfactual(self, request: Request) -> Response:
        ns, name = request.path_params["namespace"], request.path_params["name"]
        cf = await self.model(request, "cf", self.counterfactuals)
        gang = next((p for p in pending_gangs(self.world()) if p.key == f"{ns}/{name}"), None)
        if gang is None:
            return self._missing(f"no pending gang {ns}/{name}")
        why = await self.model(request, f"cf:{ns}/{name}", lambda world: cf.explain(gang))
        return PlainTextResponse(why.counterfactual)

    async def datasets(self, request: Request) -> Response:
        datasets = await self.model(request, "datasets", dataset_infos)
        return self.page(request, "datasets.html", "Dataset cache", datasets=datasets)

    async def healthz(self, request: Request) -> Response:
        """The in-cluster Deployment's probes: the store has listed (the server only
        starts after), and answers."""
        return PlainTextResponse(f"ok {self.source.version}\n")

    def _missing(self, text: str) -> Response:
        return PlainTextResponse(text + "\n", status_code=404)

    async def events(self, request: Request) -> Response:
        async def stream() -> AsyncIterator[str]:
            seen = self.source.version
            yield f"event: hello\ndata: {seen}\n\n"
            while not await request.is_disconnected():
                version = await self.source.wait_change(seen, KEEPALIVE)
                if version == seen:
                    yield ": keepalive\n\n"
                    continue
                await asyncio.sleep(DEBOUNCE)  # one update for a burst of events
                seen = self.source.version
                yield f"event: changed\ndata: {seen}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})


Endpoint = Callable[[Request], Awaitable[Response]]


def timed(endpoint: Endpoint) -> Endpoint:
    """The server's own time for a view (model + render) in a Server-Timing header, which
    `bench ui` reads beside the round trip."""

    async def run(request: Request) -> Response:
        started = time.perf_counter()
        response = await endpoint(request)
        elapsed = (time.perf_counter() - started) * 1000
        cpu = getattr(request.state, "cpu", 0.0) * 1000
        response.headers["Server-Timing"] = f"render;dur={elapsed:.1f}, cpu;dur={cpu:.1f}"
        return response

    return run


def create_app(source: Source, *, warm: bool = False) -> Starlette:
    """``warm``: build the why-pending view's scheduler state now, in a thread, so its
    first visit does not wait for it (`trainmaster ui` does; `bench ui` measures both)."""
    views = Views(source)
    warming = views.warm() if warm else None
    routes = [
        Route("/", views.root),
        Route("/topology", timed(views.topology)),
        Route("/topology/{leaf}", timed(views.leaf)),
        Route("/jobs", timed(views.jobs)),
        Route("/jobs/{namespace}/{name}", timed(views.job)),
        Route("/queues", timed(views.queues)),
        Route("/pending", timed(views.pending)),
        Route("/pending/{namespace}/{name}/counterfactual", timed(views.counterfactual)),
        Route("/datasets", timed(views.datasets)),
        Route("/events", views.events),
        Route("/healthz", views.healthz),
        Mount("/static", StaticFiles(directory=str(ASSETS / "static")), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.warming = warming
    return app
