"""`BrokerCore`: the protocol-neutral services of one broker, made once and shared by its front
ends (the gRPC client API and the remoting API), so that each rule is decided in one place.

Each front end also makes what belongs to its own event loop: a `sender.Sender` (the put path)
and a `long_polling.ArrivalWatch` (wakes for its long polls).

`clients` is over the broker's one `ClientRegistry`, which the gRPC API's interceptor and the
admin API share (the broker makes it; a core made alone, in tests, makes its own).

Thread-safety: the services are shared by the front ends' loops; each says what it holds.
"""

from __future__ import annotations

from store import MessageStore

from ..client_registry import ClientRegistry
from ..config import BrokerConfigs
from ..view import BrokerView
from .clients import ClientService
from .offsets import OffsetService
from .pull import PullService
from .roles import RoleGate
from .routes import RouteService
from .send import SendService


class BrokerCore:
    def __init__(
        self, store: MessageStore, configs: BrokerConfigs, view: BrokerView, clients: ClientRegistry | None = None
    ) -> None:
        self.store = store
        self.configs = configs
        self.view = view
        self.roles = RoleGate(configs, view)
        self.sends = SendService(store, configs, self.roles)
        self.pulls = PullService(store, configs)
        self.offsets = OffsetService(store, self.roles)
        self.routes = RouteService(store, configs, view, self.roles)
        self.clients = ClientService(clients if clients is not None else ClientRegistry(configs.broker.client_limits))
