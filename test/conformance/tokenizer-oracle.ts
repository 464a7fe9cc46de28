// SGLang's /tokenize handler run in-process in the conformance kit's
// virtualenv, for tokenizer directories the real server cannot load (kit
// serve always serves the tiny model).

import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { ensureSglangKit } from '../support/sglang-kit.ts';

// SGLang's /tokenize handler without its HTTP server: the tokenizer loaded by
// SGLang's get_tokenizer, templates by its TemplateManager, the request by
// OpenAIServingTokenize, one JSON line in and out per request. config.json
// (ModelConfig) comes from the tiny model in every directory.
const ORACLE = String.raw`
import asyncio, json, logging, sys, warnings
warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
from types import SimpleNamespace
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.entrypoints.openai.protocol import TokenizeRequest
from sglang.srt.entrypoints.openai.serving_tokenize import OpenAIServingTokenize
from sglang.srt.parser.template_manager import TemplateManager
from sglang.srt.runtime_context import publish
from sglang.srt.server_args import ServerArgs
from sglang.srt.utils.hf_transformers.tokenizer import get_tokenizer

def serving(model_dir):
    args = ServerArgs(model_path=model_dir, device="cpu")
    publish(args, role="test")
    manager = SimpleNamespace(tokenizer=get_tokenizer(model_dir), processor=None,
        model_config=ModelConfig.from_server_args(args), server_args=None,
        served_model_name="tiny", config_value=lambda name: None)
    templates = TemplateManager()
    templates.load_chat_template(manager, None, model_dir)
    return OpenAIServingTokenize(manager, templates)

async def main():
    current, srv = None, None
    for line in sys.stdin:
        req = json.loads(line)
        if req["dir"] != current:
            current, srv = req["dir"], serving(req["dir"])
        body = TokenizeRequest.model_validate(req["body"])
        resp = await srv._handle_non_streaming_request(body, body, None)
        out = json.loads(resp.model_dump_json() if hasattr(resp, "model_dump_json") else resp.body)
        print(json.dumps({"tokens": out["tokens"]} if "tokens" in out else {"error": out.get("message")}), flush=True)

asyncio.run(main())
`;

export type OracleAnswer = { tokens: unknown } | { error: string };

export function runOracle(requests: readonly { dir: string; body: unknown }[]): Promise<OracleAnswer[]> {
  const kit = resolve(import.meta.dirname, '../../hack/sglang');
  const env = {
    ...process.env,
    PYTHONPATH: `${kit}/stubs:${kit}`,
    HF_HUB_OFFLINE: '1',
    TRANSFORMERS_OFFLINE: '1',
    PYTHONDONTWRITEBYTECODE: '1',
  };
  const child = spawn(join(ensureSglangKit(), 'bin/python'), ['-c', ORACLE], {
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (b: Buffer) => out.push(b));
  child.stderr.on('data', (b: Buffer) => err.push(b));
  child.stdin.end(requests.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return new Promise((resolvePromise, reject) => {
    child.once('error', reject);
    child.once('close', (code) => {
      const lines = Buffer.concat(out)
        .toString('utf8')
        .split('\n')
        .filter((l) => l.startsWith('{'));
      if (code !== 0 || lines.length !== requests.length)
        reject(new Error(`oracle exited ${code}:\n${Buffer.concat(err).toString('utf8').slice(-3000)}`));
      else resolvePromise(lines.map((l) => JSON.parse(l) as OracleAnswer));
    });
  });
}
