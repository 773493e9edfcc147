"""anonymask.flows.

Importing the package makes Prefect's SIGTERM handler wait for an import in progress
(``anonymask.core.stopping.import_safe``): every flow run in this process, served or called, gets
it, so a stop that lands in torch's import ends the run tidily instead of with SIGABRT."""


def _make_prefect_sigterm_import_safe() -> None:
    from prefect.utilities import engine

    from anonymask.core.stopping import import_safe

    engine._prefect_sigterm_handler = import_safe(engine._prefect_sigterm_handler)


_make_prefect_sigterm_import_safe()
