"""`m3 ask`: M3-Agent's control loop over a memory, with CAM's tools and PyraVid's expansion.

Algorithm 1 of seed 000: the trajectory starts with the system prompt and the question plus the
instruction prompt; each of up to H rounds the model reasons and ends with one action. ``[Answer]``
ends the loop; any other action runs a tool (:mod:`m3cli.stages.ask.tools`) whose results come back in the
next user message as a delimited data block, followed by the instruction again, and before the last
round by the ``last_round_prompt`` ("must be [Answer] ... reasonable guesses"). A malformed or unknown
action fails its round (recorded, the model is told why) and the loop goes on. If the last round still
has no answer, one extra "answer now" turn is asked for (bounded; recorded as ``forced``).

Without an LLM the same memory gives a retrieval-only answer, labelled as such: computed from the
memory's structure by the question's form (:mod:`m3cli.stages.ask.offline`), one sentence citing
exactly the lines it used.

Every question yields one ``m3.answer/1`` record (see ``schemas/answer.v1.json``); failures are
recorded in ``error`` so a batch keeps going.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from m3cli.schemas.records import AnswerEvidence, AnswerRecord, AnswerRound, AnswerTokens
from m3cli.stages.ask import prompts as P
from m3cli.stages.ask.actions import ToolError, parse_action, split_reasoning
from m3cli.stages.ask.dates import line_time
from m3cli.stages.ask.guards import check_query, clean_answer, echoes_m3, is_placeholder, known_names
from m3cli.stages.ask.nodes import Node, Scope
from m3cli.stages.ask.questions import Question
from m3cli.stages.ask.text import fmt_time, has_quote, overlap, terms
from m3cli.stages.ask.tools import run_action
from m3cli.stages.ask.tools_context import ToolContext
from m3cli.stages.configs.ask import AskConfig
from m3cli.stages.core.errors import InputError, M3Error
from m3cli.stages.core.sizes import count

log = logging.getLogger(__name__)

ANSWER_SCHEMA = "m3.answer/1"
NODE_KINDS = ("episodic", "semantic", "character", "relationship", "clip", "global", "conflict")
MAX_QUESTION_CHARS = 2000
RETRIEVAL_K = 5
EVIDENCE_CLIPS = 3
QUOTE_MARGIN = 0.1
RESULT_TEXT_CHARS = 200
REASONING_CHARS = 4000
P_MAX_QUERY = 500
CITED_BONUS = 10.0  # a line the answer cites outranks any line it merely shares words with


# ============================================================================== configuration


def parse_kinds(spec: str | None) -> tuple[frozenset[str] | None, bool]:
    """``--kinds``: node kinds to use and whether face/voice equivalences are used.

    ``episodic,semantic`` keeps only those kinds; ``-semantic`` drops one; ``-equivalences`` shows raw
    perception ids (no character unification) and drops the equivalence lines (M3-Agent's ablations).
    """
    if not spec:
        return None, False
    items = [s.strip().lower() for s in spec.split(",") if s.strip()]
    plus = [i for i in items if not i.startswith("-")]
    minus = [i[1:] for i in items if i.startswith("-")]
    valid = (*NODE_KINDS, "equivalences")
    for item in plus + minus:
        if item not in valid:
            raise InputError(
                f"--kinds: unknown kind {item!r}; valid: {', '.join(valid)} (prefix - to drop one)"
            )
    raw_ids = "equivalences" in minus
    kinds_plus = [k for k in plus if k != "equivalences"]
    kinds = set(kinds_plus) if kinds_plus else set(NODE_KINDS)
    kinds -= set(minus)
    if not kinds:
        raise InputError(f"--kinds {spec!r} leaves no node kind to search")
    return (None if kinds == set(NODE_KINDS) else frozenset(kinds)), raw_ids


# ============================================================================== the asker


class Asker:
    """Answers questions over one opened memory; holds the embedder, the LLM client and the config."""

    def __init__(
        self,
        memory: Any,
        embedder: Any,
        llm: Any = None,
        config: AskConfig | None = None,
        cache: Any = None,
        memory_name: str | None = None,
    ):
        self.memory = memory
        self.embedder = embedder
        self.llm = llm
        self.config = config or AskConfig()
        self.cache = cache
        self.memory_name = memory_name
        want = getattr(memory, "embed_model", "")
        have = getattr(embedder, "version", "")
        if want and have and want != have:
            from m3cli.stages.backends.embed import mismatch_message

            raise InputError(mismatch_message(memory_name or "the memory", want, have))
        self._vec_cache: dict[str, np.ndarray] = {}
        self._parsed: Any = None  # each scope's lines parsed once for the run's retrieval-only answers
        self._ctx: ToolContext | None = None
        if llm is not None and hasattr(llm, "use_cache"):
            llm.use_cache(cache)
        self.system_prompt, self.instruction = P.control_prompts(self.config.tools, self.config.prompt_style)

    def warm(self) -> None:
        """Load the embedding model now, so the first question's latency is its own."""
        self.embed("warm up")

    @property
    def mode(self) -> str:
        return "llm" if self.llm is not None else "retrieval-only"

    def embed(self, text: str) -> np.ndarray:
        vec = self._vec_cache.get(text)
        if vec is None:
            vec = np.asarray(self.embedder.embed([text])[0], dtype=np.float32)
            self._vec_cache[text] = vec
        return vec

    # ------------------------------------------------------------------ one question
    def ask(self, q: Question) -> dict[str, Any]:
        """One ``m3.answer/1`` record (as JSON data) for ``q``; a failure is recorded in its ``error``."""
        started = time.perf_counter()
        record = self._blank(q)
        try:
            scope = self._scope(q)
            ctx = ToolContext(
                memory=self.memory,
                embed=self.embed,
                scope=scope,
                k=self.config.k,
                threshold=self.config.threshold,
                clip_k=self.config.clip_k,
                clip_threshold=self.config.clip_threshold,
                llm=self.llm,
                cache=self.cache,
                question=q.question,
                multi_video=scope.video is None and len(self.memory.videos()) > 1,
                now=self.config.now,
            )
            if q.options:
                record.options = list(q.options)
            if self.llm is None:
                self._retrieval_only(q.question, ctx, record, q.options)
            else:
                from m3cli.stages.ask.choice import letter_in, with_options

                asked = with_options(q.question, q.options) if q.options else q.question
                self._ctx = ctx
                try:
                    self._loop(asked, ctx, record)
                finally:
                    self._ctx = None
                    record.evidence = evidence(ctx, record.answer, q.question, record.cited)
                if q.options:
                    record.choice = letter_in(record.answer, len(q.options))
        except M3Error as exc:
            record.error = str(exc)
        except Exception as exc:  # a bug must not sink a batch of questions; it is logged with its traceback
            log.exception("question %r failed", q.id or q.question)
            record.error = f"internal error: {type(exc).__name__}: {exc}"
        record.latency_s = round(time.perf_counter() - started, 4)
        return record.to_json()

    def ask_many(self, questions: Iterable[Question | dict]) -> Iterator[dict[str, Any]]:
        """One record per question, in order; a bad question becomes a record with ``error`` set."""
        for item in questions:
            if isinstance(item, Question):
                yield self.ask(item)
            else:  # an already-failed input line
                q = Question(item.get("question") or "", item.get("id"), item.get("video"))
                q.before_clip = item.get("before_clip")
                yield self.failed(q, item["error"])

    def failed(self, q: Question, error: str) -> dict[str, Any]:
        """The record of a question that was never asked (a bad input line, a video the memory lacks)."""
        record = self._blank(q)
        record.error = error
        return record.to_json()

    def _blank(self, q: Question) -> AnswerRecord:
        """A record with nothing answered yet. Built without validation: whatever the question was (an
        over-long one too), it comes back as a record carrying its error, never as an exception."""
        return AnswerRecord.model_construct(
            schema=ANSWER_SCHEMA,
            id=q.id,
            question=q.question,
            video=q.video,
            before_clip=q.before_clip,
            mode=self.mode,
            answer=None,
            evidence=[],
            trajectory=[],
            rounds=0,
            tokens=AnswerTokens.model_construct(prompt=0, completion=0),
            latency_s=0.0,
            llm_s=0.0,
            model=getattr(self.llm, "model", None),
            prompt_version=P.prompt_version(self.config.prompt_style),
            config=self.config.as_json(),
            memory=self.memory_name,
            error=None,
        )

    def video_id(self, ref: str) -> str:
        """``--video``: a content id of the memory, or the file name (or stem, or path) of one of its
        videos; an unknown or ambiguous name is refused with the videos the memory holds."""
        videos = self.memory.videos()
        if ref in videos:
            return ref
        from pathlib import PurePath

        want = PurePath(ref).name
        paths = {v: getattr(self.memory, "video_path", lambda _v: None)(v) for v in videos}
        hits = [v for v, p in paths.items() if p and want in (PurePath(p).name, PurePath(p).stem)]
        if len(hits) == 1:
            return hits[0]
        listed = [f"{v} ({PurePath(p).name})" if (p := paths.get(v)) else v for v in videos[:10]]
        shown = ", ".join(listed) + (" ..." if len(videos) > 10 else "")
        where = self.memory_name or "the memory"
        if hits:
            raise InputError(f"--video {ref!r} names several videos of {where}: use a video id ({shown})")
        raise InputError(
            f"unknown video id {ref!r} (nor a video file name of {where}): it holds {shown or 'no videos'}"
        )

    def _scope(self, q: Question) -> Scope:
        if not q.question or not q.question.strip():
            raise InputError("empty question")
        if len(q.question) > MAX_QUESTION_CHARS:
            raise InputError(
                f"question too long ({len(q.question)} characters, at most {MAX_QUESTION_CHARS})"
            )
        if q.video is not None:
            q.video = self.video_id(q.video)
        if q.before_clip is not None and (not isinstance(q.before_clip, int) or q.before_clip < 0):
            raise InputError(f"before_clip must be a clip index >= 0, got {q.before_clip!r}")
        return Scope(
            video=q.video, before_clip=q.before_clip, kinds=self.config.kinds, raw_ids=self.config.raw_ids
        )

    # ------------------------------------------------------------------ retrieval only
    def _retrieval_only(
        self, question: str, ctx: ToolContext, record: AnswerRecord, options: list[str] | None = None
    ) -> None:
        """No LLM: the answer computed from the memory's structure (:mod:`m3cli.stages.ask.offline`),
        citing exactly the lines it used; the trajectory shows the retrieved lines with their cosine."""
        from m3cli.stages.ask.offline import OfflineAnswerer
        from m3cli.stages.ask.wording import evidence_of

        t0 = time.perf_counter()
        from m3cli.stages.ask.retrieval import focus

        scope, focused = focus(self.memory, self.embed, ctx.scope, question)  # an archive: one video
        if self._parsed is None:
            from m3cli.stages.ask.facts import ParsedLines

            self._parsed = ParsedLines()
        answerer = OfflineAnswerer(
            self.memory, self.embed, scope, self.config.threshold, now=self.config.now, parsed=self._parsed
        )
        if options:  # multiple choice: the option the offline answer supports best
            from m3cli.stages.ask.choice import offline_choice

            letter, ans, support = offline_choice(answerer, question, options)
            record.choice = letter
            record.choice_support = [round(x, 4) for x in support]
        else:
            ans = answerer.answer(question)
        k = max(self.config.k, RETRIEVAL_K)
        nodes = answerer.retrieved[:k] or [ln.node for ln in ans.cited]
        ctx.remember([ln.node for ln in ans.cited])
        record.trajectory.append(
            AnswerRound.model_construct(
                round=1,
                reasoning=None,
                action="Answer",
                tool="offline",
                query=question,
                results=_results(ctx, nodes),
                error=None,
                note=f"question form: {ans.form}" + ("" if ans.supported else " (unsupported)"),
                seconds=round(time.perf_counter() - t0, 4),
            )
        )
        record.rounds = 1
        used = ans.cited if ans.supported else []  # the nearest line of a miss is named, not evidence
        record.evidence = [AnswerEvidence.model_construct(**e) for e in evidence_of(answerer, used)]
        if used:
            record.cited = [ln.node.id for ln in used]
        if focused:
            ans.text = f"{ans.text} {focused}"
        record.answer = record.choice or ans.text
        if options:
            record.answer_text = ans.text

    # ------------------------------------------------------------------ the LLM loop
    def _chat(self, messages: list[dict], record: AnswerRecord) -> Any:
        reply = self.llm.chat(messages, task="ask", max_tokens=self.config.max_tokens)
        _spent(record, reply.prompt_tokens, reply.completion_tokens, reply.latency_s)
        return reply

    def _loop(self, question: str, ctx: ToolContext, record: AnswerRecord) -> None:
        rounds = self.config.rounds
        first = P.first_user_message(question, "", self.instruction)
        if rounds == 1:
            first += "\n\n" + P.LAST_ROUND_PROMPT
        messages = [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": first}]
        trajectory = record.trajectory
        for i in range(rounds):
            last = i == rounds - 1
            t0 = time.perf_counter()
            reply = self._chat(messages, record)
            record.rounds = i + 1
            messages.append({"role": "assistant", "content": reply.text})
            step = AnswerRound.model_construct(
                round=i + 1, reasoning=None, action=None, tool=None, query=None, results=[], error=None
            )
            data, note = "", ""
            try:
                action = parse_action(reply.text)
                step.reasoning = action.reasoning[:REASONING_CHARS] or None
                step.action = action.tag
                if action.tool == "answer":
                    if not action.content:
                        raise ToolError(
                            "[Answer] is empty: write the answer itself after [Answer] on the same line, "
                            "e.g. [Answer] Alice"
                        )
                    if is_placeholder(action.content):
                        raise ToolError(
                            f"{action.content!r} is a placeholder, not an answer: write the answer itself "
                            "after [Answer]"
                        )
                    if echoes_m3(action.content):
                        raise ToolError(
                            "that [Answer] repeats m3's own message: write the answer to the question itself"
                        )
                    step.tool, step.query = "answer", None
                    self._set_answer(record, ctx, action.content)
                elif last:
                    raise ToolError(f"the last round must be [Answer], got [{action.tag}]")
                else:
                    step.query = action.content[:P_MAX_QUERY]
                    wasted = check_query(action.tag, action.tool or "", action.content, trajectory)
                    if wasted and action.tool in self.config.tools:
                        raise ToolError(wasted)
                    result = run_action(ctx, action, self.config.tools)
                    step.tool, step.query = result.tool, result.query
                    step.results = _results(ctx, result.nodes)
                    if result.note:
                        step.note = result.note
                    if result.tool in ("rewatch", "listen"):
                        step.observation = result.lines[0][:1000] if result.lines else None
                    _spent(record, result.prompt_tokens, result.completion_tokens, result.llm_s)
                    tag = P.nonce(question, str(i), result.tool)
                    data = P.data_block(tag, f'round="{i + 1}" tool="{result.tool}"', result.lines)
            except ToolError as exc:
                step.error = str(exc)
                if step.reasoning is None:
                    step.reasoning = split_reasoning(reply.text)[1].strip()[:REASONING_CHARS] or None
                note = f"Your previous action was rejected: {exc}. {P.NO_INSTRUCTION}"
            step.seconds = round(time.perf_counter() - t0, 4)
            trajectory.append(step)
            if record.answer is not None or last:
                break
            messages.append(
                {
                    "role": "user",
                    "content": P.round_user_message(
                        data, self.instruction, last=i + 1 == rounds - 1, note=note
                    ),
                }
            )
        if record.answer is None:
            self._force_answer(messages, record)

    def _set_answer(self, record: AnswerRecord, ctx: ToolContext | None, raw: str) -> None:
        """The answer as users read it: no "Answer:" prefixes or [n3] citations, names instead of ids."""
        ctx = ctx or self._ctx
        names: dict[str, str | None] = {}
        cited_ids: list[str] = []
        if ctx is not None:
            videos: set[str | None] = {n.video for n in ctx.evidence} or {ctx.scope.video}
            video = next(iter(videos)) if len(videos) == 1 else ctx.scope.video
            names = known_names(ctx.characters(video))
        clean = clean_answer(raw, names)
        if ctx is not None:
            cited_ids = [ctx.aliases[a] for a in clean.cited if a in ctx.aliases]
        record.answer = clean.text or raw.strip()
        if record.answer != raw.strip():
            record.answer_raw = raw.strip()
        if clean.unnamed:
            record.unnamed = clean.unnamed
        if cited_ids:
            record.cited = cited_ids

    def _force_answer(self, messages: list[dict], record: AnswerRecord) -> None:
        """The last round did not answer: ask once more for an answer only (bounded, recorded)."""
        messages.append({"role": "user", "content": P.FORCE_ANSWER_PROMPT})
        t0 = time.perf_counter()
        reply = self._chat(messages, record)
        step = AnswerRound.model_construct(
            round=record.rounds,
            forced=True,
            reasoning=None,
            action=None,
            tool="answer",
            query=None,
            results=[],
            error=None,
        )
        try:
            action = parse_action(reply.text)
            step.action = action.tag
            step.reasoning = action.reasoning[:REASONING_CHARS] or None
            if action.tool == "answer" and action.content and echoes_m3(action.content):
                step.error = "the forced answer only repeats m3's own message"
            elif action.tool == "answer" and action.content and not is_placeholder(action.content):
                self._set_answer(record, None, action.content)
            else:
                step.error = f"still no [Answer] (got [{action.tag}])"
        except ToolError:
            text = split_reasoning(reply.text)[1].strip()
            if text and echoes_m3(text):  # m3's prompt echoed back is no answer
                step.error = "the forced answer only repeats m3's own message"
            elif text:  # a bare answer without the tag is still an answer
                self._set_answer(record, None, text[:2000])
                step.action = "Answer"
                step.note = "answer given without the [Answer] tag"
            else:
                step.error = "empty reply"
        step.seconds = round(time.perf_counter() - t0, 4)
        record.trajectory.append(step)
        if record.answer is None:
            record.error = f"no [Answer] after {count(record.rounds, 'round')} and one forced turn"


def _spent(record: AnswerRecord, prompt: int, completion: int, llm_s: float) -> None:
    """Add one call's tokens and LLM seconds to the record's running totals."""
    record.tokens.prompt += prompt
    record.tokens.completion += completion
    record.llm_s = round((record.llm_s or 0.0) + llm_s, 4)


def _results(ctx: ToolContext, nodes: list[Node]) -> list[dict[str, Any]]:
    return [
        {
            "id": n.id,
            "alias": ctx.alias(n),
            "clip": n.clip,
            "kind": n.kind,
            "score": round(float(n.score), 4),
            "cosine": round(float(n.sim), 4),
            "text": ctx.text_of(n)[:RESULT_TEXT_CHARS],
        }
        for n in nodes
    ]


# ============================================================================== evidence


def _character_list(ctx: ToolContext, nodes: list[Node]) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for n in nodes:
        known = {c.id: c.name for c in ctx.characters(n.video)}
        for c in n.characters or n.entities:
            if c not in out:
                out[c] = {"id": c, "name": known.get(c)}
        if not n.characters and not n.entities:
            for name in n.names:
                out.setdefault(name, {"id": None, "name": name})
    return list(out.values())


def evidence(
    ctx: ToolContext, answer: str | None, question: str, cited: list[str] | None = None
) -> list[AnswerEvidence]:
    """The clips an answer rests on: nodes the run retrieved, ranked by how much they support it.

    Lines the answer cites (``[n3]``) come first; then lines sharing the answer's and the question's
    terms. Only nodes actually retrieved during the run can appear.
    """
    if not ctx.evidence:
        return []
    a_terms, q_terms = terms(answer or ""), terms(question)
    order = {n.id: i for i, n in enumerate(ctx.evidence)}
    named = set(cited or ())
    strength = {
        n.id: overlap(a_terms, n.text)
        + 0.5 * overlap(q_terms, n.text)
        + n.score
        + (CITED_BONUS if n.id in named else 0.0)
        for n in ctx.evidence
    }
    ranked = sorted(ctx.evidence, key=lambda n: (-strength[n.id], order[n.id]))
    groups: dict[tuple[str, int], list[Node]] = {}
    for n in ranked:
        groups.setdefault((n.video, n.clip), []).append(n)
    out = []
    for (video, clip), nodes in list(groups.items())[:EVIDENCE_CLIPS]:
        info = ctx.memory.clip_info(video, clip) if clip >= 0 else None
        starts = [n.t_start for n in nodes if n.t_start is not None]
        ends = [n.t_end for n in nodes if n.t_end is not None]
        # a quote of what someone said is the best citation, unless a clearly stronger line says more
        best = next(
            (
                n
                for n in nodes[:3]
                if has_quote(ctx.text_of(n)) and strength[nodes[0].id] - strength[n.id] <= QUOTE_MARGIN
            ),
            nodes[0],
        )
        start = min(starts) if starts else (info.start if info else None)
        at = line_time(ctx.timeline(), video, start)  # absolute, when the video's start is known
        out.append(
            AnswerEvidence.model_construct(
                video=video,
                clip=clip,
                start=start,
                end=max(ends) if ends else (info.end if info else None),
                node_ids=[n.id for n in nodes[:5]],
                quote=ctx.text_of(best),
                characters=_character_list(ctx, nodes[:5]),
                **({"at": at} if at else {}),  # type: ignore[arg-type]  # an extra field
            )
        )
    return out


# ============================================================================== text view


def render_text(record: dict[str, Any]) -> str:
    """A readable view of one answer record for people (``--format text``)."""
    from m3cli.stages.ask.choice import letter

    lines = [f"Q: {record['question']}"]
    if record.get("id"):
        lines[0] += f"  [{record['id']}]"
    if record.get("error"):
        lines.append(f"ERROR: {record['error']}")
    if record.get("answer") is not None:
        label = "A" if record["mode"] == "llm" else "A (retrieval only, no LLM)"
        lines.append(f"{label}: {record['answer']}")
        for i, opt in enumerate(record.get("options") or []):
            lines.append(f"  {letter(i)}. {opt}")
        if record.get("answer_text"):
            lines.append(f"  because: {record['answer_text']}")
    if record.get("evidence"):
        lines.append("Evidence:")
        for e in record["evidence"]:
            people = ", ".join(c["name"] or c["id"] for c in e["characters"] if c["name"] or c["id"])
            lines.append(
                f"  - {e['file'] + ' ' if e.get('file') else ''}clip {e['clip']} "
                f"{fmt_time(e['start'])}-{fmt_time(e['end'])}"
                + (f" ({people})" if people else "")
                + f": {e['quote']}"
            )
    if record["mode"] == "llm" and record.get("trajectory"):
        lines.append("Trajectory:")
        for s in record["trajectory"]:
            what = f"[{s['action']}] {s['query'] or ''}".strip() if s.get("action") else "(no action)"
            tail = f" -> {len(s['results'])} result(s)" if s.get("tool") not in (None, "answer") else ""
            err = f"  REJECTED: {s['error']}" if s.get("error") else ""
            lines.append(f"  {s['round']}. {what}{tail}{err}" + ("  (forced)" if s.get("forced") else ""))
    t = record["tokens"]
    lines.append(
        f"rounds {record['rounds']} | tokens {t['prompt']}+{t['completion']} | {record['latency_s']:.2f} s"
    )
    return "\n".join(lines) + "\n"
