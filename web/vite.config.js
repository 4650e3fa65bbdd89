// The dashboard is served by `carve server` under /ui/ from assets embedded in the binary
// (cmake/embed_dir.cmake). CARVE_UI_OUT names where the build writes them (the build directory).
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/ui/',
  build: {
    outDir: process.env.CARVE_UI_OUT || 'dist',
    emptyOutDir: true,
    // Everything as files (no data: URIs) and no inline script: the server's Content-Security-Policy
    // allows scripts only from itself.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    reportCompressedSize: false,
  },
});
