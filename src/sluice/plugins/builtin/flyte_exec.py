"""The worker side of the `flyte` plugin: run one flytekit task template in this process.

The pool's worker imports flytekit once, at its first flyte job, and then runs every task
through flytekit's own entrypoint (what `pyflyte-execute` calls) in process: inputs are
written as `inputs.pb`, the task's outputs read back from `outputs.pb`, a failure from
`error.pb` (an ErrorDocument, which flytekit writes instead of raising). Values cross as JSON,
converted with the template's interface at this boundary.

A job is {"id", "runner": "flyte", "template": <TaskTemplate as JSON>, "inputs", "work_dir",
"source_root", "module_file", "dynamic_builder"}; the answer is {"id", "outputs"} or {"id",
"error": {"type", "message", "traceback", "recoverable", "user"}}.

A @dynamic task's job names a `dynamic_builder` ("module:function", given by the task spec,
so this layer imports nothing above it): the task runs with flytekit's serialization context
in the environment, and the DynamicJobSpec flytekit writes is handed to the builder, whose
sluice workflow (JSON) is the answer's one output, `workflow`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from sluice.plugins.builtin.flyte_context import (
    checkpoints,
    images_are_here,
    run_eager_locally,
    task_environment,
)
from sluice.plugins.builtin.flyte_literals import literal_map, to_json
from sluice.spec.compound import BUILD_OUTPUT

_RESOLVER_FLAG = "--resolver"


def run_flyte_job(job: dict[str, Any]) -> dict[str, Any]:
    from flyteidl.core import tasks_pb2
    from google.protobuf import json_format

    template = json_format.ParseDict(job["template"], tasks_pb2.TaskTemplate())
    root = Path(job["work_dir"]) / hashlib.sha256(job["id"].encode()).hexdigest()[:24]
    try:
        return {"id": job["id"], **_execute(template, job, root)}
    finally:
        shutil.rmtree(root / "meta", ignore_errors=True)  # raw outputs stay: they are referenced


def _execute(template: Any, job: dict[str, Any], root: Path) -> dict[str, Any]:
    from flytekit.bin.entrypoint import _execute_task

    images_are_here()
    resolver, args = resolver_of(list(template.container.args))
    meta, raw = root / "meta", root / "raw"
    shutil.rmtree(meta, ignore_errors=True)  # an earlier attempt's files are not this one's
    meta.mkdir(parents=True)
    raw.mkdir(parents=True, exist_ok=True)
    inputs = meta / "inputs.pb"
    variables = template.interface.inputs.variables
    inputs.write_bytes(literal_map(job["inputs"], variables).SerializeToString())
    module = dict(zip(args[::2], args[1::2], strict=False)).get("task-module", "")
    _switch_root(module, job.get("source_root", ""))
    _on_path(job.get("source_root", ""))
    _preload(module, job)
    if template.metadata.is_eager:
        run_eager_locally(resolver, args)
    checkpoint, previous_checkpoint = checkpoints(job)
    out, scratch = meta / "out", meta / "tmp"
    scratch.mkdir()
    # flytekit makes temporary directories for every task and never removes them: make them
    # under this attempt's own directory, which is removed once the answer is read.
    previous, tempfile.tempdir = tempfile.tempdir, str(scratch)
    try:
        with task_environment(template, job):
            _execute_task(
                inputs=str(inputs),
                output_prefix=str(out),
                test=False,
                raw_output_data_prefix=str(raw),
                resolver=resolver,
                resolver_args=args,
                checkpoint_path=checkpoint,
                prev_checkpoint=previous_checkpoint,
            )
    finally:
        tempfile.tempdir = previous
    builder = job.get("dynamic_builder")
    if builder:
        return _built(template, out, builder, job)
    return _answer(template, out)


def _built(template: Any, out: Path, builder: str, job: dict[str, Any]) -> dict[str, Any]:
    """A @dynamic task's answer: the sluice workflow of the DynamicJobSpec it wrote (or of
    the outputs it returned directly), made by `builder` ("module:function"), as the build
    node's one output."""
    from flyteidl.core import dynamic_job_pb2, literals_pb2

    futures, outputs = out / "futures.pb", out / "outputs.pb"
    if not futures.exists() and not outputs.exists():
        return _answer(template, out)  # error.pb, or nothing written
    module, _, name = builder.partition(":")
    build = getattr(importlib.import_module(module), name)
    spec = (
        dynamic_job_pb2.DynamicJobSpec.FromString(futures.read_bytes())
        if futures.exists()
        else None
    )
    values = None if spec is not None else literals_pb2.LiteralMap.FromString(outputs.read_bytes())
    try:
        workflow = build(template, spec, values, job.get("source_root", ""))
    except Exception as exc:  # the translation's DefinitionError, named as such
        return {"error": {"type": type(exc).__name__, "message": str(exc), "traceback": "",
                          "recoverable": False}}  # fmt: skip
    return {"outputs": {BUILD_OUTPUT: workflow}}


def resolver_of(args: list[str]) -> tuple[str, list[str]]:
    """The resolver and its arguments in a `pyflyte-execute` command line."""
    if _RESOLVER_FLAG not in args or "--" not in args:
        raise ValueError(f"not a flytekit python task command line: {args}")
    resolver = args[args.index(_RESOLVER_FLAG) + 1]
    return resolver, args[args.index("--") + 1 :]


def _switch_root(module: str, source_root: str) -> None:
    """Forget the modules of another copy of the task's code: a worker that ran the task's
    package from one code archive (unpacked beside `source_root`, an earlier registration's)
    must import it afresh from `source_root`, not reuse what it imported, nor look for new
    modules in the old copy. Only a sibling of `source_root` is forgotten, never a directory
    the worker's own imports come from."""
    if not source_root or not module:
        return
    root = Path(source_root).resolve()
    old_root = _import_root(sys.modules.get(module.partition(".")[0]))
    if old_root is None or old_root == root or old_root.parent != root.parent:
        return
    for name, found in list(sys.modules.items()):
        where = getattr(found, "__file__", None)
        if where and Path(where).resolve().is_relative_to(old_root):
            del sys.modules[name]
    sys.modules.pop(module.partition(".")[0], None)  # a namespace package has no file
    if str(old_root) in sys.path:
        sys.path.remove(str(old_root))
    importlib.invalidate_caches()


def _import_root(package: Any) -> Path | None:
    """The directory a top-level module or package was imported from."""
    file = getattr(package, "__file__", None)
    if file:
        path = Path(file).resolve()
        return path.parents[1] if path.name == "__init__.py" else path.parent
    locations = list(getattr(package, "__path__", []) or [])
    return Path(locations[0]).resolve().parent if locations else None


def _on_path(source_root: str) -> None:
    if source_root and source_root not in sys.path:
        sys.path.insert(0, source_root)


def _preload(module: str, job: dict[str, Any]) -> None:
    """Load a task module that sluice loaded from a file under a private name (its stem was
    taken), which no import finds: from its file, under that same name."""
    from sluice.modules import PRIVATE_PREFIX

    file = job.get("module_file", "")
    if not module.startswith(PRIVATE_PREFIX) or module in sys.modules or not file:
        return
    spec = importlib.util.spec_from_file_location(module, file)
    if spec is None or spec.loader is None:
        return  # flytekit's own import then fails, naming the module
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module] = loaded
    spec.loader.exec_module(loaded)


def _answer(template: Any, out: Path) -> dict[str, Any]:
    from flyteidl.core import errors_pb2, literals_pb2

    outputs, error = out / "outputs.pb", out / "error.pb"
    if error.exists():
        document = errors_pb2.ErrorDocument.FromString(error.read_bytes())
        return {"error": _error(document.error)}
    if (out / "futures.pb").exists():  # a @dynamic task not translated as one
        message = (
            "the task wrote futures.pb (a DynamicJobSpec): it is a flytekit @dynamic task, "
            "which sluice runs only when its template carries flytekit's serialization "
            "context (_F_SS_C), as flytekit 1.16 writes it"
        )
        return {"error": {"type": "DynamicTaskError", "message": message, "traceback": "",
                          "recoverable": False}}  # fmt: skip
    if not outputs.exists():
        return {"error": {"type": "OutputsError", "message": "the task wrote no outputs.pb",
                          "traceback": "", "recoverable": False}}  # fmt: skip
    found = literals_pb2.LiteralMap.FromString(outputs.read_bytes())
    declared = template.interface.outputs.variables
    return {
        "outputs": {
            k: to_json(v, declared[k].type, f"output {k!r}") for k, v in found.literals.items()
        }
    }


def _error(container_error: Any) -> dict[str, Any]:
    from flyteidl.core import errors_pb2, execution_pb2

    return {
        "type": container_error.code or "FlyteError",  # e.g. USER:RuntimeError
        "message": container_error.message,
        "traceback": container_error.message,
        "recoverable": container_error.kind == errors_pb2.ContainerError.RECOVERABLE,
        "user": container_error.origin == execution_pb2.ExecutionError.USER,
    }
