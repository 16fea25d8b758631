"""The Jinja2 environment of the generator's templates, and rendering one Python template.

Every generated file is laid out by a template in ``templates/`` (shipped inside the wheel);
:mod:`.pipeline` renders the configuration files and the model registries with
:func:`environment`, the ``--from-yaml`` converter (:mod:`.recipe.render`, :mod:`.convert`)
renders its recipe modules with :func:`render_python`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.rendering import render

TEMPLATES = "templates"


def environment(repo: Path) -> Any:
    """The Jinja2 environment over ``<repo>/templates``: undefined names are errors, block tags
    leave no blank lines behind, nothing is escaped (the output is Python and Markdown)."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(repo) / TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render_python(repo: Path, template: str, context: dict[str, Any], what: str) -> str:
    """``templates/<template>`` rendered with ``context`` and formatted by black; ``what`` names
    the output in the error of a rendering that is not valid Python."""
    if not (Path(repo) / TEMPLATES / template).is_file():
        raise CodegenError(f"{TEMPLATES}/{template} not found under {repo}: the converter runs "
                           "from a checkout of hyper_parallel (pip install -e .)")
    raw = environment(repo).get_template(template).render(**context)
    try:
        return render.format_python(raw)
    except Exception as exc:  # a bug here, never the user's input: values are checked literals
        raise CodegenError(f"{template}: the rendered {what} is not valid Python ({exc})") from exc


__all__ = ["TEMPLATES", "environment", "render_python"]
