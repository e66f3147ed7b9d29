"""``kms model``: the local embedding model (status, install, download). A module of its own, so the embedding
stack (numpy, onnxruntime) is imported at its top and loads only for these commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from kmscli.output import JsonOpt, cli_errors, console, open_db, print_json
from server.config.settings import load_settings
from server.index.embed import embed_stats, install_model, model_status
from server.index.embed.model import download_model
from server.store.db import default_db_path

model_app = typer.Typer(help="The local embedding model (all-MiniLM-L6-v2) for semantic search.", no_args_is_help=True)


@model_app.command("status")
def model_status_cmd(
    verify: Annotated[bool, typer.Option("--verify", help="Hash the model file.")] = False,
    load: Annotated[bool, typer.Option("--load", help="Load it to prove it works.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Which model is used, where it is, and whether it is ready."""
    with cli_errors():
        data = model_status(load_settings().get("embed.model_dir") or None, verify=verify, load=load)
        data["index"] = embed_stats(open_db()) if default_db_path().exists() else None  # the model alone
    if json_out:
        print_json(data)
        return
    ok = "[green]ready[/]" if data.get("ready") else f"[yellow]not ready[/]: {escape(str(data.get('reason')))}"
    console.print(f"model [bold]{data['model']}[/] ({data['dim']} dimensions): {ok}", highlight=False)
    where = f"dir {data.get('dir') or '-'} (source: {data.get('source') or 'none'})"
    console.print(where, markup=False, highlight=False)
    idx = data["index"]
    if idx is None:
        return
    console.print(
        f"embedded notes {idx['embeddedNotes']}/{idx['notes']}, {idx['chunks']} chunks, "
        f"{idx['vectors']} vectors"
        + (f", {idx['pendingNotes']} pending (run `kms embed`)" if idx["pendingNotes"] else "")
    )


@model_app.command("install")
def model_install_cmd(
    source: Annotated[Path, typer.Option("--from", help="A directory with model.onnx, tokenizer.json, ...")],
) -> None:
    """Copy a model directory into kms's data dir (checked first)."""
    with cli_errors():
        dest = install_model(source)
    console.print(f"installed the model into {dest}", markup=False)


@model_app.command("download")
def model_download_cmd() -> None:
    """Fetch the model from the model hub into fastembed's cache (needs the internet)."""
    console.print("downloading sentence-transformers/all-MiniLM-L6-v2 (about 90 MB)...")
    try:
        path = download_model()
    except Exception as exc:  # offline, hub down: say so plainly
        console.print(f"[red]download failed[/]: {type(exc).__name__}: {escape(str(exc))}")
        raise typer.Exit(1) from None
    console.print(f"model ready in {path}", markup=False)
