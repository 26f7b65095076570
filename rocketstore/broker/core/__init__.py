"""The broker core: what the broker decides about a client's request, once, whatever protocol
carried it. One service per concern, as RocketMQ has one processor per concern that its protocol
layers hand off to:

| module | owns |
|---|---|
| `refusals` | `Refusal` and its `Reason`s: every expected "no" of the services below |
| `roles` | whether the broker's role (slave, fenced master) lets it take a request now |
| `queues` | names, queue ids, existing topics, committed offsets: checks of every read and commit |
| `send`, `sender` | sends: admission, queues, batching, the put's outcome, the late fence; the put path |
| `pull`, `long_polling` | pulls: checks, size limits, status classification; waiting for arrivals |
| `offsets` | consumer offsets and queue bounds |
| `routes` | a topic's route, protocol-neutral |
| `clients` | heartbeats, goodbyes and consumer lists, over the broker's one `ClientRegistry` |
| `services` | `BrokerCore`: the services of one broker, shared by its front ends |

The front ends (`messaging.py` for gRPC, `remoting_server.py` for remoting) decode a request, call
a service and encode its result; each maps reasons and store statuses to its codes in one table
(`codes.py`, `remoting_codes.py`). Nothing here imports a protocol: no gRPC, no protobuf, no
remoting frames (`tests/unit/test_layers.py` checks it).
"""
