"""``convert --ray [ADDRESS]``: a folder conversion spread over a Ray cluster (extra ``[ray]``).

The driver (the machine running the command) keeps everything about files: convert.py lists
the inputs, names the outputs, reports failures and writes every output atomically. Ray Data
moves bytes, and nothing else has to be shared between the machines:

  read tasks, on the driver's node   each input's bytes (with --resume: its output checked first)
  Engine actors, spread one per node decode, convert, encode; each builds its own Engine, so it
                                     picks its plan (ISA, threads, backends) from its own node
  the driver                         writes each output file as its bytes arrive

Why bytes back to the driver rather than actors writing: on other machines the output folder
is usually not there (or is another disk with the same name); encoded pictures are small next
to the work of converting them. The model is shipped the same way (its files, a few hundred KB
for the bundled one), so every actor converts with exactly the driver's model, and so are the
run's ``convert.Settings`` (every flag the local run honours, read by the same code).
Results match a local run byte for byte: the same Engine code, model, settings and encoder.
The driver must be a node of the cluster (``--ray HOST:PORT`` or ``auto`` from any node): a Ray
Client (``ray://``) driver has no node to read its own files on, and is refused.
"""
from __future__ import annotations

import dataclasses
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..picture import io as picture_io

INSTALL_HINT = 'pip install "a2r_edge[ray]"'
# Pictures per actor call: enough to fill the Engine's three-stage pipeline (convert_batch),
# few enough that an actor holds only a handful of decoded pictures at a time.
BATCH = 4


def require_ray() -> None:
    """ValueError (one line for the CLI, exit 2) when Ray Data cannot be imported."""
    try:
        import ray.data  # noqa: F401
    except ImportError:
        raise ValueError(f"--ray needs Ray Data, which is not installed: {INSTALL_HINT}") from None


def is_address(value: str) -> bool:
    """Looks like what ray.init(address=) takes: "auto", "local", "host:port" (or a ray://
    address, refused later). The CLI checks it so that ``--ray INPUT`` is refused instead of
    taking INPUT as the address."""
    return value in ("auto", "local") or ":" in value


def check_reachable(address: str, timeout_s: float = 10.0) -> None:
    """OSError in one line when nothing listens at a host:port address: ray.init would wait
    minutes for it. A head node answers in well under a second; 10 s allows a slow network.
    "auto", "local" and ray:// addresses are left to Ray."""
    if address in ("", "auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except (OSError, ValueError) as exc:
        raise OSError(f"--ray {address}: no Ray cluster reachable there ({exc})") from None


def model_files(model) -> tuple[dict[str, bytes], str]:
    """The files that make up ``model`` (as --model takes it), by name relative to the
    package folder, and the name to load from that folder ("" for the folder itself)."""
    from ..model import package as pkg
    m = pkg.resolve(model)
    if m.folder is None:  # a plain ONNX file: one stage, one file
        path = Path(m.stages[0].params["file"])
        return {path.name: path.read_bytes()}, path.name
    paths = {m.folder / "manifest.json"}
    for stage in m.stages:
        paths |= {v for v in stage.params.values() if isinstance(v, Path)}
    return {str(p.relative_to(m.folder)): p.read_bytes() for p in sorted(paths)}, ""


def _read(batch: dict, resume: bool, scale, sbs: bool) -> dict:
    """Read task (on the driver's node): each input's bytes, or its failure line, or skip."""
    n = len(batch["index"])
    data, error, skip = [b""] * n, [""] * n, [False] * n
    for r in range(n):
        src, dst = Path(batch["src"][r]), Path(batch["dst"][r])
        try:
            raw = picture_io.read_bytes(src)
            if resume and dst.is_file() and picture_io.output_complete(
                    dst, picture_io.decode_picture(raw, src).shape, scale, sbs):
                skip[r] = True
            else:
                data[r] = raw.tobytes()
        except picture_io.CONVERT_ERRORS as exc:
            error[r] = picture_io.failure(src, exc)
    return {"index": batch["index"], "src": batch["src"], "dst": batch["dst"],
            "data": np.array(data, dtype=object), "error": np.array(error, dtype=object),
            "skip": np.array(skip)}


class _Converter:
    """Ray Data actor: one Engine on its node, built from the driver's ``Settings``
    (convert.settings) with the model files shipped to it; a batch of input bytes -> output
    bytes. A picture that fails is a failure line in its row, never an exception (the job goes
    on); an Engine that cannot be built on this node fails each picture sent here, saying why."""

    def __init__(self, files: dict[str, bytes], entry: str, opts):
        self.broken = None
        # Kept for the actor's life: the Engine's result cache keys hash the model files.
        self._model_dir = tempfile.TemporaryDirectory(prefix="a2r_edge_model_")
        root = Path(self._model_dir.name)
        for name, content in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(content)
        self.opts = dataclasses.replace(opts, model=str(root / entry))
        try:
            self.engine = self.opts.engine()
        except picture_io.CONVERT_ERRORS as exc:
            self.broken = f"no Engine on {socket.gethostname()}: {type(exc).__name__}: {exc}"

    def __call__(self, batch: dict) -> dict:
        n = len(batch["index"])
        data, error = [b""] * n, list(batch["error"])
        rows, imgs = [], []
        for r in range(n):
            if error[r] or batch["skip"][r]:
                continue
            src = Path(batch["src"][r])
            if self.broken:
                error[r] = f"{src}: {self.broken}"
                continue
            try:
                imgs.append(picture_io.decode_picture(np.frombuffer(batch["data"][r], np.uint8), src))
                rows.append(r)
            except picture_io.CONVERT_ERRORS as exc:
                error[r] = picture_io.failure(src, exc)
        for r, img, out in zip(rows, imgs, self._convert(imgs)):
            dst = Path(batch["dst"][r])
            try:
                if isinstance(out, BaseException):
                    raise out
                data[r] = self.opts.output_bytes(img, out, dst)
            except picture_io.CONVERT_ERRORS as exc:
                error[r] = picture_io.failure(Path(batch["src"][r]), exc)
        return {"index": batch["index"], "data": np.array(data, dtype=object),
                "error": np.array(error, dtype=object), "skip": batch["skip"]}

    def _convert(self, imgs: list) -> list:
        """Outputs of ``imgs`` (pipelined); when one fails, each on its own, failures as their
        exception, so that only the bad picture is lost."""
        if not imgs:  # nothing left to convert (or no Engine on this node)
            return []
        try:
            return self.opts.convert_batch(self.engine, imgs)
        except picture_io.CONVERT_ERRORS:
            outs = []
            for img in imgs:
                try:
                    outs.append(self.opts.convert(self.engine, img))
                except picture_io.CONVERT_ERRORS as exc:
                    outs.append(exc)
            return outs


def _cpu_nodes(ray) -> int:
    return sum(1 for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU", 0) >= 1)


def _this_node(ray) -> dict[str, float]:
    """Resources that pin a task to the driver's node: each Ray node holds one unit of its own
    "node:<IP>" resource (every Ray 2.x; the newer label selectors are not in all of them), and
    a sliver of it is enough."""
    me = ray.get_runtime_context().get_node_id()
    node = next(n for n in ray.nodes() if n["NodeID"] == me)
    key = next(k for k in node["Resources"] if k.startswith("node:") and "__" not in k)
    return {key: 0.001}


def convert_on_ray(opts, address: str, files: list[Path],
                   targets: list[Path]) -> Iterator[picture_io.Result]:
    """The Ray converter for convert.run, with the run's ``Settings`` (convert.settings): connects
    now (address "": starts or joins a local Ray as ray.init() does, else the cluster's address;
    a session already open in this process is used as it is), ships the model (the file as
    given: each actor applies the settings' conventions itself) and the settings, and returns
    the results as they arrive, in any order. Ray is shut down at the end if it was started
    here."""
    import logging

    import ray
    import ray.data

    from ..model import package as pkg
    package = opts.package()  # a missing or unadaptable model is a usage error, here
    model, entry = model_files(pkg.resolve(opts.model))
    started = not ray.is_initialized()
    if started:
        check_reachable(address)
        ray.init(address=address or None, logging_level=logging.WARNING)
    if ray.util.client.ray.is_connected():
        ray.shutdown()
        raise ValueError("--ray: a Ray Client (ray://) driver cannot read its inputs on a cluster "
                         "node; run the command on a node of the cluster (--ray HOST:PORT or auto)")
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # convert.py prints its own progress lines
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # no per-dataset INFO lines

    def results():
        try:
            if not files:
                return
            items = [{"index": i, "src": str(s), "dst": str(d)}
                     for i, (s, d) in enumerate(zip(files, targets))]
            actors = max(1, min(_cpu_nodes(ray), -(-len(items) // BATCH)))
            here = _this_node(ray)
            ds = ray.data.from_items(items).map_batches(
                _read, batch_size=BATCH, batch_format="numpy",
                fn_kwargs={"resume": opts.resume, "scale": package.scale,
                           "sbs": opts.side_by_side},
                # The inputs are on the driver's disk. Reading is I/O: no CPU reserved, so it
                # also runs beside an actor on a one-CPU node.
                num_cpus=0, resources=here)
            ds = ds.map_batches(
                _Converter, batch_size=BATCH, batch_format="numpy",
                fn_constructor_kwargs={"files": model, "entry": entry, "opts": opts},
                # One actor per node (Ray Data spreads actors over the nodes); the Engine
                # sizes its threads from the node, the CPU asked for only places the actor.
                compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=1)
            for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
                for i, data, error, skip in zip(batch["index"], batch["data"], batch["error"],
                                                batch["skip"]):
                    yield (int(i), None if skip or error else bytes(data), error or None)
        finally:
            if started:
                ray.shutdown()
    return results()
