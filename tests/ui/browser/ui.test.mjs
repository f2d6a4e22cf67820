// weir ui in a real browser (Debian's chromium, driven by playwright-core), against a real
// redis-server, a running `weir work` consumer and a downstream HTTP service that rejects
// the first jobs it gets (400: dead-lettered) until it is "fixed". The story an operator
// lives: a queue appears, a job dies, they open it, fix the downstream, requeue it from
// the job page, and watch it get processed. Along the way: the dead-letter queue's bulk
// delete asks for confirmation, and Cancel leaves the jobs alone; the queue page draws the
// history the consumer samples (every second here), a job is found by its id, jobs by
// their key, and the cron page shows a schedule's next tick in local time.
//
//   node ui.test.mjs            (WEIR_BIN: the weir binary, default target/debug/weir)
//   WEIR_UI_SCREENSHOTS=docs/ui node ui.test.mjs   also writes the pages' screenshots there
import { chromium } from "playwright-core";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const weir = process.env.WEIR_BIN || path.join(root, "target/debug/weir");
const shots = process.env.WEIR_UI_SCREENSHOTS ? path.resolve(root, process.env.WEIR_UI_SCREENSHOTS) : null;
const STEP = 20_000; // the longest any one step may take, ms
const children = [];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "weir-ui-"));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Polls `check` (async, true when done) every 100 ms for up to STEP ms. */
async function until(what, check) {
  const start = Date.now();
  let last;
  while (Date.now() - start < STEP) {
    try {
      if (await check()) return;
    } catch (e) {
      last = e; // the page was reloading: try again
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for: ${what}${last ? ` (last error: ${last.message})` : ""}`);
}

function run(cmd, args, name) {
  const child = spawn(cmd, args, { stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  child.stderr.on("data", (d) => { err += d; });
  child.on("exit", (code) => {
    if (code && !child.stopping) console.error(`${name} exited with ${code}:\n${err}`);
  });
  children.push(child);
  return child;
}

async function listening(port) {
  await until(`port ${port} to listen`, () => new Promise((resolve) => {
    const c = net.connect(port, "127.0.0.1", () => { c.end(); resolve(true); });
    c.on("error", () => resolve(false));
  }));
}

function enqueue(redisUrl, queue, lines) {
  const out = spawnSync(weir, ["enqueue", "--queue", queue, "--redis-url", redisUrl], {
    input: lines.map((l) => JSON.stringify(l)).join("\n") + "\n",
  });
  if (out.status !== 0) throw new Error(`weir enqueue failed: ${out.stderr}`);
}

/** The downstream: rejects jobs (400, so weir dead-letters them) until fixed. */
function downstream(port) {
  const state = { healthy: false, done: [] };
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => { body += d; });
    req.on("end", () => {
      if (!state.healthy) {
        res.writeHead(400).end("no template named welcome");
        return;
      }
      state.done.push(JSON.parse(body).id);
      res.writeHead(200).end("sent");
    });
  });
  server.listen(port, "127.0.0.1");
  return { state, server };
}

async function shot(page, name) {
  if (!shots) return;
  fs.mkdirSync(shots, { recursive: true });
  await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

async function main() {
  const [redisPort, uiPort, hookPort] = await Promise.all([freePort(), freePort(), freePort()]);
  run("redis-server", ["--port", `${redisPort}`, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir], "redis-server");
  await listening(redisPort);
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  const hook = downstream(hookPort);
  const ui = `http://127.0.0.1:${uiPort}`;
  run(weir, ["ui", "--addr", `127.0.0.1:${uiPort}`, "--redis-url", redisUrl, "--refresh", "1s"], "weir ui");
  await listening(uiPort);

  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 760 } });
    await page.goto(ui);
    await page.getByText("No queues yet").waitFor({ timeout: STEP });
    // The consumer starts once the UI has looked (the UI's first look also finds queues
    // by their keys, and a consumer's heartbeat writes some).
    run(weir, ["work", "--queue", "emails", "--handler", `http://127.0.0.1:${hookPort}/`, "--redis-url", redisUrl, "--no-metrics", "--sample-period", "1s"], "weir work");

    // A queue appears, by itself, once something is enqueued; the job dies downstream.
    enqueue(redisUrl, "emails", [{ kind: "welcome", id: "welcome-ada", payload: { to: "ada@example.com", template: "welcome" } }]);
    enqueue(redisUrl, "reports", [
      { kind: "daily", payload: { day: "2026-12-01" }, delay: "1h", key: "acme" },
      { kind: "daily", payload: { day: "2026-12-02" }, delay: "2h", key: "globex" },
      { kind: "daily", payload: { day: "2026-12-03" }, delay: "3h", key: "acme" },
      { kind: "weekly", payload: { week: 49 } },
    ]);
    const row = page.locator('tr[data-queue="emails"]');
    await row.waitFor({ timeout: STEP });
    const deadLink = row.locator('a[href*="state=dead"]');
    await until("the job to be dead-lettered", async () => (await deadLink.textContent()) === "1");
    await shot(page, "queues");

    // The dead-letter queue, then the dead job.
    await deadLink.click();
    const job = page.locator('tr[data-job="welcome-ada"] td.id a');
    await job.waitFor({ timeout: STEP });
    await shot(page, "dead-letter-queue");
    await job.click();
    await page.getByRole("heading", { name: "Job welcome-ada" }).waitFor({ timeout: STEP });
    await until("the job page to show the error", async () =>
      (await page.locator("dd.state").textContent()).includes("Dead")
      && (await page.locator("pre.err").textContent()).includes("400"));
    await shot(page, "job");

    // The downstream is fixed; the job is requeued from its page and processed.
    hook.state.healthy = true;
    await page.getByRole("button", { name: "Requeue" }).click();
    await page.getByText("Requeued 1 job.").waitFor({ timeout: STEP });
    await page.mouse.move(1, 1); // a pointer resting on a button holds the refresh
    await until("the downstream to get the requeued job", async () => hook.state.done.includes("welcome-ada"));
    await page.goto(ui);
    await until("the overview to show it acked and none dead", async () =>
      (await row.locator("td.acked").textContent()) === "1" && (await deadLink.textContent()) === "0");
    const api = await (await page.request.get(`${ui}/api/queues`)).json();
    const emails = api.queues.find((q) => q.name === "emails");
    if (emails.dead !== 0 || emails.counters.acked !== 1) throw new Error(`/api/queues says ${JSON.stringify(emails)}`);

    // The queue page charts the history the consumer samples: the ack shows on the
    // throughput chart, and every chart has its line.
    await page.goto(`${ui}/queue?queue=emails`);
    await until("the charts to show the ack", async () => {
      await page.reload();
      const acked = page.locator('figure[data-chart="throughput"] polyline[data-series="acked"]');
      if ((await acked.count()) === 0) return false;
      const ys = (await acked.first().getAttribute("points")).split(" ").map((p) => Number(p.split(",")[1]));
      return Math.min(...ys) < Math.max(...ys); // a rise: not a flat line at zero
    });
    for (const chart of ["throughput", "failures", "deferrals", "depth"]) {
      const n = await page.locator(`figure[data-chart="${chart}"] polyline`).count();
      if (n === 0) throw new Error(`the ${chart} chart has no line`);
    }
    await shot(page, "queue");
    await page.goto(ui);

    // Bulk delete asks first; Cancel leaves the jobs alone.
    hook.state.healthy = false;
    enqueue(redisUrl, "emails", [1, 2, 3].map((n) => ({ kind: "welcome", id: `welcome-${n}`, payload: { n } })));
    await until("three more dead jobs", async () => (await deadLink.textContent()) === "3");
    await deadLink.click();
    await page.locator("[data-select-all]").check();
    await page.getByRole("button", { name: "Delete selected" }).click();
    await page.getByText("Delete 3 jobs of the dead-letter queue of emails?").waitFor({ timeout: STEP });
    await shot(page, "confirm");
    await page.getByRole("link", { name: "Cancel" }).click();
    await page.mouse.move(1, 1);
    await until("the three jobs still there", async () => (await page.locator("tr[data-job]").count()) === 3);

    // A job found by its id; times in local time, the epoch on hover.
    await page.locator('#job-search input[name="id"]').fill("welcome-2");
    await page.locator("#job-search button").click();
    await page.getByRole("heading", { name: "Job welcome-2" }).waitFor({ timeout: STEP });
    const enqueued = page.locator("dl.facts time").first();
    await until("times in local time", async () => /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(/.test(await enqueued.textContent()));
    if (!(await enqueued.getAttribute("title")).startsWith("epoch ")) throw new Error("no epoch on hover");

    // Jobs by key, with their key and payload.
    await page.goto(`${ui}/queue?queue=reports&state=delayed`);
    await page.locator('#job-filter input[name="key"]').fill("acme");
    await page.locator("#job-filter button").click();
    await until("only acme's jobs", async () => {
      const keys = await page.locator("tr[data-job] td.key").allTextContents();
      return keys.length === 2 && keys.every((k) => k === "acme");
    });
    if (!(await page.locator("tr[data-job] td.payload").first().textContent()).includes("2026-12-0")) {
      throw new Error("no payload preview");
    }
    await shot(page, "jobs-by-key");

    // The cron page: a schedule's next tick (on the hour), in local time.
    const cron = spawnSync(weir, ["cron", "add", "--queue", "reports", "--name", "hourly-digest", "--every", "1h", "--kind", "daily", "--redis-url", redisUrl]);
    if (cron.status !== 0) throw new Error(`weir cron add failed: ${cron.stderr}`);
    await page.goto(`${ui}/cron?queue=reports`);
    const next = page.locator('tr[data-schedule="hourly-digest"] td.next time');
    await next.waitFor({ timeout: STEP });
    if (Number(await next.getAttribute("data-ms")) % 3_600_000 !== 0) throw new Error("the next tick is not on the hour");
    await until("the next tick in local time", async () => /:00:00 \(in /.test(await next.textContent()));
    await shot(page, "cron");

    // Workers and limits.
    await page.goto(`${ui}/workers`);
    await page.locator("#workers tbody tr").first().waitFor({ timeout: STEP });
    await shot(page, "workers");
    await page.goto(`${ui}/limits?queue=emails`);
    await page.fill("#rate", "200/s");
    await page.getByRole("button", { name: "Store" }).click();
    await page.getByText("Limits stored").waitFor({ timeout: STEP });
    await shot(page, "limits");
    console.log("weir ui browser test: ok");
  } catch (e) {
    const pages = browser.contexts().flatMap((c) => c.pages());
    if (pages.length) {
      const where = path.join(os.tmpdir(), "weir-ui-failure.png");
      await pages[0].screenshot({ path: where, fullPage: true }).catch(() => {});
      e.message += `\n  at ${pages[0].url()} (screenshot: ${where})`;
    }
    throw e;
  } finally {
    await browser.close();
  }
}

let failed = false;
try {
  await main();
} catch (e) {
  failed = true;
  console.error(`weir ui browser test failed: ${e.stack || e}`);
} finally {
  for (const c of children.reverse()) {
    c.stopping = true;
    c.kill("SIGTERM");
  }
  fs.rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
