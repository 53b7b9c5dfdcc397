"""The runtime around the placement engine.

Pure (no Kubernetes imports; the simulator hosts these too): ``queue.py`` (queue sort),
``gang_scheduler.py`` (``GangScheduler``: one cycle, reserve/permit, anti-starvation),
``cycle.py`` (a cycle with its bind and post-filter ports), ``ports.py``.

Against the API server: ``loop.py`` (``SchedulerRuntime``), ``cache.py`` and
``convert.py`` (informer events to state), ``gangs.py`` (pods + PodGroups to gangs),
``config.py``, ``binder.py``, ``preemptor.py``, ``events.py``, ``report.py``,
``leader.py``, ``metrics.py``, ``service.py``, ``tasks.py``. Nothing is imported here,
so importing a pure module loads no client library.
"""
