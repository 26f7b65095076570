// The official RocketMQ 5 Node.js client against a RocketStore broker: one flow per run, named on
// the command line; prints one JSON line with what happened. Run by
// tests/integration/test_node_client.py, which checks the result.
'use strict';
const {
  Producer, SimpleConsumer, PushConsumer, ConsumeResult,
} = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const [endpoint, flow, topic, group, accessKey, secretKey] = process.argv.slice(2);
const base = { endpoints: endpoint, namespace: '', requestTimeout: 10000 };
if (accessKey) base.sessionCredentials = { accessKey, accessSecret: secretKey };
// TLS: the client trusts the roots gRPC finds (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH names the test CA).
if (process.env.ROCKETSTORE_TLS === '1') base.sslEnabled = true;
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

async function drain(consumer, wanted, deadlineMs, onMessage) {
  const deadline = Date.now() + deadlineMs;
  while (wanted() && Date.now() < deadline) {
    for (const m of await consumer.receive(16, 2000)) await onMessage(m);
  }
}

const flows = {
  // Producer: sync and concurrent sends; SimpleConsumer: receive, ack, change invisible duration,
  // redelivery of an unacked message with a higher attempt.
  async produceAndConsume() {
    const producer = new Producer({ ...base, topic });
    await producer.startup();
    const sent = [];
    try {
      sent.push((await producer.send({ topic, tag: 't', body: Buffer.from('n-0') })).messageId);
      const concurrent = await Promise.all([1, 2, 3].map(i => producer.send({ topic, tag: 't', keys: [`k${i}`], body: Buffer.from(`n-${i}`) })));
      sent.push(...concurrent.map(r => r.messageId));
    } finally {
      await producer.shutdown();
    }
    const consumer = new SimpleConsumer({ ...base, consumerGroup: group, subscriptions: new Map([[topic, '*']]), awaitDuration: 3000 });
    await consumer.startup();
    const first = []; const second = []; const acked = new Set();
    try {
      await drain(consumer, () => first.length < 4, 30000, async m => {
        const body = m.body.toString();
        first.push([m.messageId, m.deliveryAttempt, body]);
        if (body === 'n-0') return; // left unacked: comes back after its 2 s
        if (body === 'n-1') { await consumer.changeInvisibleDuration(m, 1000); return; }
        await consumer.ack(m); acked.add(body);
      });
      await drain(consumer, () => second.length < 2, 30000, async m => {
        second.push([m.messageId, m.deliveryAttempt, m.body.toString()]);
        await consumer.ack(m);
      });
    } finally {
      await consumer.shutdown();
    }
    return { sent, first, second };
  },

  // PushConsumer: a failing listener is retried, then dead-lettered.
  async pushRetry() {
    const producer = new Producer({ ...base, topic });
    await producer.startup();
    try {
      for (const body of ['good', 'bad']) await producer.send({ topic, tag: 't', body: Buffer.from(body) });
    } finally {
      await producer.shutdown();
    }
    const seen = [];
    const consumer = new PushConsumer({
      ...base,
      consumerGroup: group,
      subscriptions: new Map([[topic, '*']]),
      messageListener: {
        async consume(m) {
          const body = m.body.toString();
          seen.push([body, m.deliveryAttempt]);
          return body === 'bad' ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
        },
      },
    });
    await consumer.startup();
    const deadline = Date.now() + 60000;
    while (Date.now() < deadline && seen.filter(s => s[0] === 'bad').length < 3) await sleep(100);
    await sleep(1500); // the third failure's forward to the dead-letter queue
    await consumer.shutdown();
    return { seen };
  },

  // Transactional producer: commit, rollback, and check-backs answered by the checker.
  async transactions() {
    const checked = [];
    const producer = new Producer({
      ...base,
      topic,
      checker: {
        async check(m) {
          const body = m.body.toString();
          checked.push(body);
          return body === 'checked-commit' ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
        },
      },
    });
    await producer.startup();
    const sent = {};
    try {
      for (const body of ['commit', 'rollback', 'checked-commit', 'checked-rollback']) {
        const transaction = producer.beginTransaction();
        sent[body] = (await producer.send({ topic, tag: 'tx', body: Buffer.from(body) }, transaction)).messageId;
        if (body === 'commit') await transaction.commit();
        if (body === 'rollback') await transaction.rollback();
      }
      const deadline = Date.now() + 60000;
      while (Date.now() < deadline && new Set(checked).size < 2) await sleep(100);
      await sleep(500); // the checker's EndTransaction calls
    } finally {
      await producer.shutdown();
    }
    const consumer = new SimpleConsumer({ ...base, consumerGroup: group, subscriptions: new Map([[topic, '*']]), awaitDuration: 3000 });
    await consumer.startup();
    const got = [];
    try {
      await drain(consumer, () => got.length < 2, 30000, async m => {
        got.push([m.body.toString(), m.messageId]);
        await consumer.ack(m);
      });
      for (const m of await consumer.receive(16, 2000)) got.push([m.body.toString(), m.messageId]);
    } finally {
      await consumer.shutdown();
    }
    return { sent, checked: [...new Set(checked)].sort(), got: got.sort() };
  },

  // A delayed message is not received before its time.
  async delayed() {
    const producer = new Producer({ ...base, topic });
    await producer.startup();
    let sentAt;
    try {
      sentAt = Date.now();
      await producer.send({ topic, tag: 'd', delay: 3000, body: Buffer.from('later') });
    } finally {
      await producer.shutdown();
    }
    const consumer = new SimpleConsumer({ ...base, consumerGroup: group, subscriptions: new Map([[topic, '*']]), awaitDuration: 3000 });
    await consumer.startup();
    let receivedAfterMs = null;
    try {
      await drain(consumer, () => receivedAfterMs === null, 30000, async m => {
        receivedAfterMs = Date.now() - sentAt;
        await consumer.ack(m);
      });
    } finally {
      await consumer.shutdown();
    }
    return { receivedAfterMs };
  },

  // FIFO: the messages of a message group in order, under redelivery.
  async fifo() {
    const producer = new Producer({ ...base, topic });
    await producer.startup();
    try {
      for (const body of ['A1', 'B1', 'A2', 'B2', 'A3']) {
        await producer.send({ topic, messageGroup: body[0], body: Buffer.from(body) });
      }
    } finally {
      await producer.shutdown();
    }
    const consumer = new SimpleConsumer({ ...base, consumerGroup: group, subscriptions: new Map([[topic, '*']]), awaitDuration: 3000 });
    await consumer.startup();
    const deliveries = []; const acked = new Set();
    try {
      await drain(consumer, () => acked.size < 5, 60000, async m => {
        const body = m.body.toString();
        deliveries.push([body, m.deliveryAttempt]);
        if (body === 'A1' && m.deliveryAttempt === 1) return;
        await consumer.ack(m); acked.add(body);
      });
    } finally {
      await consumer.shutdown();
    }
    return { deliveries };
  },

  // A send with the given credentials: its outcome.
  async send() {
    const producer = new Producer({ ...base, topic, maxAttempts: 1 });
    try {
      await producer.startup();
      const receipt = await producer.send({ topic, body: Buffer.from('signed') });
      return { ok: true, messageId: receipt.messageId };
    } catch (err) {
      const causes = [];
      for (let e = err; e && causes.length < 5; e = e.cause) causes.push(String(e.message || e));
      return { ok: false, error: causes.join(' <- '), code: err && err.code };
    } finally {
      await producer.shutdown().catch(() => {});
    }
  },
};

flows[flow]().then(out => {
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
}, err => {
  process.stderr.write(`${flow} failed: ${err && err.stack || err}\n`);
  process.exit(1);
});
