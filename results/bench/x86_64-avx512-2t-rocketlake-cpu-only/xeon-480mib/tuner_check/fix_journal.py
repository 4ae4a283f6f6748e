"""Run once on results/tuning/journal.log (section 109): the four studies that the first form of the
timing rule (6eb7b6a) swept recorded ``untimed_history``. Their untagged trials were timed run by
run, and their new decisions record ``copy_between``, so ``untagged_timing`` would date those
trials after bd45c9b. This records how they were timed (``untagged_timed``). A second run finds
nothing to do.

    PYTHONPATH=. python results/bench/<machine>/xeon-480mib/tuner_check/fix_journal.py
"""

from __future__ import annotations

import optuna

from tuner.study import open_storage, untagged_timing


def main() -> None:
    store = open_storage(None)
    for summary in optuna.get_all_study_summaries(store, include_best_trial=False):
        attrs = summary.user_attrs
        if attrs.get("untimed_history") and "untagged_timed" not in attrs:
            study = optuna.load_study(study_name=summary.study_name, storage=store)
            before = untagged_timing(attrs).value
            study.set_user_attr("untagged_timed", "run")
            print(summary.study_name, before, "->", untagged_timing(study.user_attrs).value)


if __name__ == "__main__":
    main()
