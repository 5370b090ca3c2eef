"""The example notebooks (examples/*.ipynb) run from top to bottom in a fresh Python kernel (nbclient + ipykernel);
their cells assert the figures' numbers against the framework's (torch's LSTM, transformers' attentions)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))


def test_there_is_an_example_per_group_of_views() -> None:
    names = [p.stem for p in NOTEBOOKS]
    assert names == ["01-recurrent", "02-transformers", "03-embeddings-decoding-training"]
    called = " ".join(c for p in NOTEBOOKS for c in ("".join(cell["source"]) for cell in json.loads(
        p.read_text())["cells"]))
    from explorer import nb

    missing = [name for name in nb.__all__ if name not in ("ViewResult", "NotebookError", "read")
               and f"nb.{name}(" not in called]
    assert not missing, f"no example calls {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_an_example_notebook_runs_and_its_checks_hold(path: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
        f"{path.name} is committed with outputs: clear them"
    NotebookClient(notebook, timeout=600, kernel_name=_this_interpreters_kernel(tmp_path, monkeypatch),
                   resources={"metadata": {"path": str(ROOT)}}).execute()  # an assert that fails raises here
    figures = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
               if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) >= 3, f"{path.name}: {len(figures)} figures displayed"  # shown inline, as Plotly


def _this_interpreters_kernel(folder: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kernel spec that runs this interpreter (the one with the explorer installed), found first through
    JUPYTER_PATH: a "python3" spec in the user's ~/.local/share/jupyter (another environment's) would otherwise win."""
    spec = folder / "kernels" / "explorer-tests"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "the tests' Python", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(folder))
    return "explorer-tests"
