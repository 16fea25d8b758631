"""From a recipe to a cluster job: ``python -m hyper_parallel.launch``.

* :mod:`.world`      the recipe's degrees against nodes x GPUs (``ConfigError`` on a mismatch)
* :mod:`.job`        the scheduler-neutral job: the torchrun command each node runs, its
                     environment, the stop grace period
* :mod:`.plan`       a training command line (recipe or legacy YAML) and the cluster's shape
                     to a job, preflighted
* :mod:`.shell`      the torchrun and Slurm scripts (``templates/launch/``)
* :mod:`.kubernetes` the Kubeflow Trainer ``TrainJob``, validated against Trainer's API models
* :mod:`.options`    the launch's own options and the request they make (the command line and
                     a fleet's ``--jobs``)
* :mod:`.fleet`      one job per recipe of a converted fleet

The launch sits above the engine: it imports the entry's parser and preflight; nothing below
imports it.
"""
