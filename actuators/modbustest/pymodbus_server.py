"""A plain pymodbus TCP server for the actuators tests (an independent peer).

Usage: pymodbus_server.py --port P [--unit 1] [--ir v0,v1,...] [--size 512]

Holding and input registers 0..size-1 and coils / discrete inputs
0..size-1 are plain storage; --ir preloads input registers from address 0.
Prints "READY <port>" on stdout once it listens.
"""
import argparse
import asyncio
import logging
import sys

from pymodbus.server import ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--unit", type=int, default=1)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--ir", default="")
    args = ap.parse_args()
    logging.getLogger("pymodbus").setLevel(logging.ERROR)

    ir = [0] * args.size
    if args.ir:
        for i, v in enumerate(args.ir.split(",")):
            ir[i] = int(v, 0)
    dev = SimDevice(
        id=args.unit,
        simdata=(
            [SimData(0, count=args.size, values=False, datatype=DataType.BITS)],
            [SimData(0, count=args.size, values=False, datatype=DataType.BITS)],
            [SimData(0, count=args.size, values=0, datatype=DataType.REGISTERS)],
            [SimData(0, values=ir, datatype=DataType.REGISTERS)],
        ),
    )
    server = ModbusTcpServer(dev, address=("127.0.0.1", args.port))
    task = asyncio.create_task(server.serve_forever())
    # Wait until the port is bound.
    for _ in range(500):
        if task.done():
            task.result()
        try:
            _, w = await asyncio.open_connection("127.0.0.1", args.port)
            w.close()
            break
        except OSError:
            await asyncio.sleep(0.01)
    print(f"READY {args.port}", flush=True)
    await task


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
