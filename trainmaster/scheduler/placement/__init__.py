"""The placement engine the cycle drives: one gang into the smallest domain
(``place.py`` over ``search.py``), a starving gang's reservation (``reservation.py``),
a burst's joint leaf plan (``plan.py``) and the preemption victim search
(``victims.py``). Pure computation over the cluster state."""
