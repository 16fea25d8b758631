"""Plan: the fastest layouts that fit a cluster, for a recipe, as recipes and jobs.

``python -m hyper_parallel.plan --module M --config C --nodes N --gpus-per-node G --gpu NAME``
(or a legacy YAML) searches the parallel layouts of the run at its global batch and sequence
length, preflights the promising ones for real, prices each preflighted step on a hardware
profile and ranks them. A package above preflight and launch: it imports them, they never
import it. The parts:

* :mod:`.space` -- the candidates and the rules that drop families, each with its reason;
* :mod:`.search` -- the order of promise, the preflights (bounded), the ranking;
* :mod:`.work` -- a role's recorded work and the nodes its groups sit on;
* :mod:`.hardware` -- the hardware profiles (datasheets, or ``--hardware FILE``);
* :mod:`.timing` -- a step's price: compute, exposed communication, the pipeline's bubble;
* :mod:`.output` -- the table and the JSON object;
* :mod:`.write` -- ``--write K DIR`` (proven recipe modules) and ``--jobs`` (job files);
* ``__main__`` -- the command line.

``docs/plan.md`` says what it searches, how it prunes and bounds its work, and what the
figures mean and cannot.
"""
