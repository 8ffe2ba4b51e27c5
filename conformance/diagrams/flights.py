"""Messages in flight through a cluster run: each becomes an arrow from the step that sent it
to the step that delivered, dropped or lost it.

The network is a bag (model.network), so a message is known by its value; of equal messages in
flight, the one sent first is taken first.
"""

from collections import Counter

from conformance.diagrams.labels import message_label
from conformance.diagrams.sequence import Arrow
from conformance.text import message_text
from model.messages import REQUEST_TYPES
from model.network import Bag, Envelope


class Flights:
    def __init__(self) -> None:
        self.pending: dict[bytes, list[Arrow]] = {}
        self.arrows: list[Arrow] = []

    def step(self, row: int, before: Bag, after: Bag, delivered: Envelope | None = None, copy: bool = False, dropped: Envelope | None = None) -> None:
        """Account for one step's change of the network: the message delivered (`copy`: a duplicate,
        which stays in flight) or dropped, the messages sent, and any that vanished (lost)."""
        remaining = Counter(key for key, _ in before)
        for envelope, fate in ((delivered, "delivered"), (dropped, "dropped")):
            if envelope is None:
                continue
            key = next(k for k, e in before if e == envelope)
            if copy:
                first = self.pending[key][0]
                self.arrows.append(Arrow(first.source, first.destination, first.label + " (again)", first.title, first.start, (row, 0), fate, first.tone))
                continue
            self._end(key, row, fate)
            remaining[key] -= 1
        now = Counter(key for key, _ in after)
        sent: set[bytes] = set()
        for key, envelope in after:
            if key in sent:
                continue
            sent.add(key)
            for _ in range(now[key] - remaining[key]):
                self._send(key, envelope, row)
        for key, count in remaining.items():
            for _ in range(count - now[key]):
                self._end(key, row, "lost")

    def finish(self) -> list[Arrow]:
        """Every arrow, those still in flight included, in the order they were sent."""
        for waiting in self.pending.values():
            self.arrows += waiting
        self.pending = {}
        return sorted(self.arrows, key=lambda a: (a.start, a.end is None, a.end or (0, 0)))

    def _send(self, key: bytes, envelope: Envelope, row: int) -> None:
        message = envelope.message
        tone = "request" if type(message) in REQUEST_TYPES else "response"
        title = f"{envelope.source} -> {envelope.destination}: {message_text(message)}"
        arrow = Arrow(envelope.source, envelope.destination, message_label(message), title, (row, 0), None, "in flight", tone)
        self.pending.setdefault(key, []).append(arrow)

    def _end(self, key: bytes, row: int, fate: str) -> None:
        arrow = self.pending[key].pop(0)
        if not self.pending[key]:
            del self.pending[key]
        arrow.end, arrow.fate = (row, 0), fate
        if fate != "delivered":
            arrow.title += f" ({fate})"
        self.arrows.append(arrow)
