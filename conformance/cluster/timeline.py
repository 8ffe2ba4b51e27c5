"""A run's history as a picture (timeline.svg): a lane per node along wall time, coloured by what
its quorum-state file said (leading, following, standing, knowing no leader), each change marked
with its epoch and leader; the faults as bands over the lanes they hit (a kill, a pause, the
node's side of a cut link); each violation as a red line at its moment. Same history, same bytes."""

from conformance.cluster.history import Event, Fault, Healed, Sample, Violation
from conformance.diagrams.layout import ROLE_STYLES
from conformance.diagrams.svg import document, element, text, tooltip

WIDTH = 960
LEFT = 80  # the node names
RIGHT = 20
TOP = 40
LANE = 44
BAR = 14
LABEL_GAP = 44  # px between two labels of one lane (every change keeps its tooltip)
FAULT_FILLS = {"kill": "#fecaca", "pause": "#e5e7eb", "partition": "#fed7aa", "wipe": "#f9a8d4"}
ENDINGS = {"restart": ("kill", "wipe"), "resume": ("pause",), "heal": ("partition",)}


def role(sample: Sample) -> str:
    """What a file says the node is, in the diagrams' role names."""
    if sample.leader == sample.node:
        return "leader"
    if sample.leader >= 0:
        return "follower"
    return "candidate" if sample.voted == sample.node else "unattached"


def fault_spans(events: list[Event], end: float) -> list[tuple[Fault, float]]:
    """Each fault with the moment it ended (its restart, resume or heal; else the run's end)."""
    spans = []
    open_faults: list[Fault] = []
    for event in events:
        if type(event) is not Fault:
            continue
        if event.kind in ENDINGS:
            started = next((f for f in open_faults if f.kind in ENDINGS[event.kind] and f.node == event.node and f.links == event.links), None)
            if started is not None:
                open_faults.remove(started)
                spans.append((started, event.t))
        else:
            open_faults.append(event)
    return spans + [(fault, end) for fault in open_faults]


def timeline_svg(events: list[Event], nodes: tuple[int, ...], violations: tuple[Violation, ...], title: str) -> str:
    end = max([event.t for event in events] + [v.t for v in violations] + [1.0])
    scale = (WIDTH - LEFT - RIGHT) / end
    height = TOP + LANE * len(nodes) + 40

    def x(t: float) -> float:
        return LEFT + t * scale

    def lane(node: int) -> float:
        return TOP + LANE * nodes.index(node) + LANE / 2

    body = [text(LEFT, 20, title, font_size=12, font_weight="bold")]
    for node in nodes:
        body.append(text(10, lane(node) + 4, f"node {node}", font_size=11))
        body.append(element("line", x1=LEFT, y1=lane(node), x2=WIDTH - RIGHT, y2=lane(node), stroke="#e2e8f0", stroke_width=1))
    for fault, until in fault_spans(events, end):
        hit = {fault.node} if fault.kind != "partition" else {n for link in fault.links for n in link}
        what = f"{fault.kind} node {fault.node}" + (f" ({fault.shape}: cut {', '.join(f'{a}->{b}' for a, b in fault.links)})" if fault.shape else "")
        for node in sorted(hit & set(nodes)):
            band = element("rect", tooltip(f"{what}, {fault.t:.1f} s to {until:.1f} s"), x=x(fault.t), y=lane(node) - LANE / 2 + 2, width=max((until - fault.t) * scale, 1), height=LANE - 4, fill=FAULT_FILLS[fault.kind])
            body.append(band)
    for node in nodes:
        samples = [event for event in events if type(event) is Sample and event.node == node]
        labelled = -LABEL_GAP  # where the lane's last label went: one closer would overlap it
        for sample, following in zip(samples, samples[1:] + [None]):
            until = end if following is None else following.t
            colour, _, _ = ROLE_STYLES[role(sample)]
            said = f"node {node} from {sample.t:.2f} s: epoch {sample.epoch}, leader {sample.leader}, voted {sample.voted}"
            body.append(element("rect", tooltip(said), x=x(sample.t), y=lane(node) - BAR / 2, width=max((until - sample.t) * scale, 1), height=BAR, fill=colour, opacity=0.85))
            changes = following is None or (following.epoch, following.leader) != (sample.epoch, sample.leader)
            if changes and x(sample.t) - labelled >= LABEL_GAP:
                label = f"e{sample.epoch}" + (f" L{sample.leader}" if sample.leader >= 0 else "")
                body.append(text(x(sample.t) + 2, lane(node) - BAR / 2 - 3, label, font_size=9))
                labelled = x(sample.t)
    for healed in (event for event in events if type(event) is Healed):
        body.append(element("line", tooltip(f"faults healed at {healed.t:.1f} s"), x1=x(healed.t), y1=TOP, x2=x(healed.t), y2=height - 30, stroke="#16a34a", stroke_width=1.5, stroke_dasharray="4 3"))
    for violation in violations:
        body.append(element("line", tooltip(f"{violation.rule} at {violation.t:.3f} s: {violation.detail}"), x1=x(violation.t), y1=TOP, x2=x(violation.t), y2=height - 30, stroke="#dc2626", stroke_width=2.5))
        body.append(text(x(violation.t) + 3, height - 32, violation.rule, font_size=10, fill="#dc2626"))
    for second in range(0, int(end) + 1, max(1, int(end) // 10 or 1)):
        body.append(text(x(second), height - 12, f"{second} s", font_size=9, fill="#475569"))
    return document(WIDTH, height, title, body)
