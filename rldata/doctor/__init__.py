"""``rldata doctor``: check every table of a store and the invariants between them, and repair what
can be repaired without guessing (:mod:`~rldata.doctor.core`); stores in object storage are checked
on a local copy of their logs (:mod:`~rldata.doctor.remote`)."""
