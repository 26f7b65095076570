"""`RoleGate`: whether this broker's role lets it take a request now, decided once for every
service of the core (sends, offset commits, pop, transactions, timers).

- A slave takes no writes: NOT_MASTER, naming its master's client endpoint when it knows it.
- In controller mode a master may be fenced (`BrokerView.write_refusal`: no lease, or handing
  over): FENCED, naming the master as far as this broker knows (possibly itself: the client asks
  again after a pause). Checked before a write (nothing was written) and again as late as possible
  before a stored write is acknowledged (`late_refusal`: the write may or may not be kept; a retry
  is safe, a false OK is not).
- Reads of pop state are served by a master, and by a slave while it acts for its master that is
  down (`read_refusal`).

Reads the view on each call (the role changes at run time); no state of its own; thread-safe as
the view is.
"""

from __future__ import annotations

from store import BrokerRole

from ..config import BrokerConfigs
from ..view import BrokerView
from .refusals import NOT_MASTER_TEXT, Reason, Refusal


class RoleGate:
    def __init__(self, configs: BrokerConfigs, view: BrokerView) -> None:
        self._broker = configs.broker
        self._view = view

    @property
    def is_slave(self) -> bool:
        return self._view.role is BrokerRole.SLAVE

    def not_master(self) -> Refusal:
        broker = self._broker
        master = self._view.master_client_endpoint()
        where = f"send to its master at {master}" if master else "its master's client endpoint is not known yet"
        text = f"{NOT_MASTER_TEXT}: {broker.broker_name} (id {broker.broker_id}) is a SLAVE: {where}"
        return Refusal(Reason.NOT_MASTER, text, master)

    def fenced(self, *, late: bool = False) -> Refusal | None:
        """Controller mode's refusal of a write this broker may not take (or, `late`, acknowledge)
        now; None when it may."""
        reason = self._view.write_refusal()
        if reason is None:
            return None
        outcome = "the write may or may not be kept: retry it" if late else "nothing was written"
        text = f"{NOT_MASTER_TEXT}: not acknowledged: {reason}; {outcome}"
        return Refusal(Reason.FENCED, text, self._view.master_client_endpoint())

    def write_refusal(self) -> Refusal | None:
        """Why this broker takes no write now (a slave, or a fenced master); None when it does."""
        return self.not_master() if self.is_slave else self.fenced()

    def late_refusal(self) -> Refusal | None:
        """The fence again, just before a stored write is acknowledged."""
        return self.fenced(late=True)

    def read_refusal(self) -> Refusal | None:
        """Pop consumption: a master's, or a slave's while it acts for its master (it is down)."""
        if self.is_slave and self._view.acting_master():
            return None
        return self.write_refusal()
