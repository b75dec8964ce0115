"""An async program in a thread and event loop of its own, for kopf and kmock under pytest.

kopf cancels every task younger than itself when it stops, so it runs in a loop without the test's tasks; kmock
can run in another one, so that it outlives a stopped operator (a restart then finds the cluster as it was).
"""

from __future__ import annotations

import asyncio
import threading


class LoopThread:
    """Runs :meth:`main` in a daemon thread; :meth:`main` sets ``ready`` once it serves and returns once
    ``stop_flag`` is set.  A failure in the thread is raised again in the test's thread."""

    def __init__(self, name: str) -> None:
        self.stop_flag = threading.Event()
        self.ready = threading.Event()
        self._failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    async def main(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        try:
            asyncio.run(self.main())
        except BaseException as error:  # noqa: B036 (reported to the test thread)
            self._failure.append(error)
        finally:
            self.ready.set()

    def check(self) -> None:
        """Fails the test with what went wrong in the thread, if anything did."""
        if self._failure:
            raise AssertionError(f"{self._thread.name} failed: {self._failure[0]!r}") from self._failure[0]

    def start(self, timeout: float = 30.0) -> None:
        self._thread.start()
        assert self.ready.wait(timeout), f"{self._thread.name} did not start within {timeout} s"
        self.check()

    def stop(self, timeout: float = 30.0) -> None:
        self.stop_flag.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self._thread.name} did not stop within {timeout} s"
        self.check()
