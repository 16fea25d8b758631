"""From the checked table to the generated files: one template context per output, rendered,
formatted, framed and written.

:mod:`.outputs` lists every generated file and exactly what it is generated from (the inputs
its header hashes). A template context decides every line of its output
(:mod:`.sections_context`, :mod:`.adapter_context`, :mod:`.reference_context`,
:mod:`.registry_context`); :mod:`.templating` lays it out with the Jinja2 templates of
``templates/``, :mod:`.render` formats the Python with black, :mod:`.framing` puts the header
over the body and :mod:`.writing` writes files atomically. :mod:`.recipe_record` remembers what
the example recipes were converted from, so that ``make codegen`` on a current tree converts
nothing.
"""
