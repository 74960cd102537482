"""rimthan-host: the host side of the four-tool protocol, done by code.

Depends on the domain core (``rimthan_workflow_registry``) and the MCP SDK;
of the verifier's package only on its stdio wire (``bridge_server`` serves the
bridge over it) and the wire's parts docs/architecture.md names, never on the
server's internals.
See docs/host-kit.md.

``protocol``         tool names, the :data:`ToolCaller` seam, refusals, the host profile
``confirmations``    confirmed state: value digests, confirmation times, how the person confirmed
``files``            the walk every project file is reached by (never through a link): writes (whole or not at
                     all), reads, existence checks and listings, the locks' own files
``own_files``        the bridge's own files: refused when another user owns or can write one, or it has other hard links
``own_folder``       ``.rimthan`` kept out of the project's git: a ``.gitignore`` of ``*`` in it
``project_files``    a step's files: symlink-free writes and readback; output attestations from disk
``write_targets``    where the host writes on the verifier's word: inside its repository policy, never its own files
``workspace``        setup: asset delivery checked against pins, the workspace manifest
``delivered``        what the bridge delivered (``.rimthan/delivered.json``): no user's file is overwritten,
                     and a resumed run (and its validators) gets its own release's assets back
``kept_copies``      a delivered file whose kept copy is gone, fetched again from the verifier (its digest checked)
``reports``          validator reports bound to the instruction and the artifacts
``kept_round``       a validation round's verdicts saved with the run's state, taken back on resume only if nothing
                     they judged changed
``runlog``           ``.rimthan/runs/<run>.log`` (what ``rimthan-mcp audit`` verifies) and resume state (an ungated
                     step's result kept whole: a resume shows it again, no move)
``run_state``        what a run's resume state holds: its bounds and shape, keyed by its checkpoint's digest
``run_lock``         one session moves a run at a time: an advisory lock on ``.rimthan/runs/<run>.lock``
``state_size``       why a run's resume state would be too large to save: the part that takes the most, what to do
``positions``        an ungated step's result past 1 MiB, kept in a side file named by its digest, bound to its
                     checkpoint
``results``          what the moves return: :class:`RunResult` (where the run is), :class:`ValidationRound` (prepare)
``result_parts``     a result's parts, typed: the step and its outputs, the question, failures, findings, the migration,
                     a round's validators
``result_shape``     the parts of a verifier's result the kit reads, their types checked before anything reads them
``session``          :class:`HostSession`: one run's protocol moves (the one host implementation)
``session_resume``   the session's resume: a run picked up from its log where its last checkpoint left it
``session_round``    the session's validation round: a gated step's files prepared, each verdict checked, submit
``session_record``   what a session records of its run: the events, the record, a prepared round
``scenario``         what drives the scripted harness: the :class:`Scenario` protocol, its contexts, how it is called
``example_files``    the files a scenario reads from a catalogue: through real folders, never a symbolic link
``harness``          the scripted harness: a session driven by a scenario (tests, demo, load, benchmarks)
``demo``             ``make demo``: a real SDK client walks the packaged workflow through the harness

The bridge (``rimthan-host serve``: a model drives a run through its own tools):

``bridge``           :class:`Bridge`: the model's moves, starting and resuming runs (the rest in the next three)
``bridge_core``      what every move shares: the active run, the project's lock, the setup step, failures in words
``bridge_steps``     a step's moves: step_done (files checked), record_verdict, the round submitted, answers
``bridge_migrate``   migrate_run: the offered release previewed, then taken once the user agrees
``migration_values`` the values a migration carries to the release it names, known even when no offer of it is
``workspace_lock``   one bridge moves a project's runs at a time: ``flock(2)`` on ``.rimthan/bridge.lock`` and
                     ``.rimthan``
``step_replies``     the replies every move ends with: where the run is, the output schemas copied per release
``audit_command``    the ``rimthan-mcp audit`` command a completed run names, from the child verifier's flags
``words``            the bridge's results in words: the step, what it needs, the one call to make next
``verifier_replies`` the bridge's own words for a verifier's failure, per failure code: one table
``tools``            the tools as the model sees them, and the check of a model's arguments against them
``asking``           asking the person directly: elicitation in both MCP protocol eras
``require_option``   the environment variable that turns on ``--require-elicitation`` (imports nothing)
``unanswered``       how a person's decline or cancel reads: the same for a question, a fact, a migration
``roots``            whether the client's roots hold the project the bridge serves
``offered``          the workflows a model may start, from the verifier's resource listing: named, bounded
``unserved``         a start the verifier refused for its workflow, in the bridge's words: the name asked, each
                     workflow it serves once
``kept_listing``     the verifier's resource listing kept per connection, read again once it says it changed
``facts``            facts the person confirms: at start_run, and mid-run with step_done's facts (verifier-checked)
                     and the round of forms that asks them (migrate_run's too, with its own question)
``fact_forms``       a fact's own form when the person is asked: its choices or type from the release's schema
``held_facts``       facts the person confirmed in a form for a move that did not happen: not asked again for it
``fact_shapes``      a fact of another type (or date form) than its field takes: refused before the person is asked
``state_schema``     a run's confirmed-state schema as the verified release names it (a fact's form reads it)
``schemas``          an output's JSON Schema from the verified release, copied into the project for the model
``outputs``          a step's files as the model wrote them: what is missing or unusable, refusals by file
``file_digests``     files a JSON output names by path and sha256: digests filled in from disk, mismatches refused
``bridge_server``    the SDK's low-level server offering the bridge's tools, and the stdio lines it reads
``link``             the verifier connection: a child ``rimthan-mcp serve`` over stdio (its stderr's last
                     lines kept for a child that exits before it answers), or a URL; whether it is up when
                     the client leaves (else the refusal ``serve`` exits with)
``reconnect``        a connection lost mid-move: restart the child once, resume from the log, say so
``serve``            the ``rimthan-host serve`` command line (its options, then the verifier's words after ``--``)
``entry``            the console script: Ctrl-C and SIGTERM handled from its first instruction
``standin``          a scripted model (tests); ``agent_demo`` ``make agent-demo``
"""

from .result_parts import Failure, Finding, Migration, NeededFact, Question, Step, StepOutput, Validator, WalkedStep
from .results import RunResult, ValidationRound

__all__ = [
    "Failure",
    "Finding",
    "Migration",
    "NeededFact",
    "Question",
    "RunResult",
    "Step",
    "StepOutput",
    "ValidationRound",
    "Validator",
    "WalkedStep",
]
