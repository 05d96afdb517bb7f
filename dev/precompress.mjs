// Writes FILE.br and FILE.gz beside each script, stylesheet and wasm module in the given folder,
// so the server sends them compressed without compressing per request (Node's own zlib: no
// download, no extra tool).
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const dir = process.argv[2];
for (const name of fs.readdirSync(dir)) {
  if (!/\.(wasm|js|css)$/.test(name)) continue;
  const file = path.join(dir, name);
  const data = fs.readFileSync(file);
  fs.writeFileSync(`${file}.gz`, zlib.gzipSync(data, { level: 9 }));
  fs.writeFileSync(`${file}.br`, zlib.brotliCompressSync(data, {
    params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: data.length },
  }));
}
