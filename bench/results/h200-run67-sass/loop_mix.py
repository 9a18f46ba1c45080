import re,sys,collections
lines=open(sys.argv[1]).read().splitlines()
ins=[]
for l in lines:
    m=re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);',l)
    if m: ins.append((int(m.group(1),16),m.group(2)))
addr={a:i for i,(a,_) in enumerate(ins)}
loops=[]
for i,(a,t) in enumerate(ins):
    m=re.search(r'BRA\s+(?:`\(\.L_x_\d+\)|)?.*?0x([0-9a-f]+)',t)
    if 'BRA' in t:
        m=re.search(r'0x([0-9a-f]+)',t.split('BRA')[1])
        if m:
            tgt=int(m.group(1),16)
            if tgt<a and tgt in addr: loops.append((addr[tgt],i))
loops.sort(key=lambda x:x[0]-x[1])
def op(t):
    t=re.sub(r'^@!?U?P\w+\s+','',t)
    return t.split()[0]
for s,e in loops[:int(sys.argv[2]) if len(sys.argv)>2 else 3]:
    c=collections.Counter(op(t) for _,t in ins[s:e+1])
    print(f"loop {ins[s][0]:#x}-{ins[e][0]:#x}: {e-s+1} instrs")
    print("  ",", ".join(f"{k} {v}" for k,v in c.most_common(40)))
