"""Text renderings of packets and elements.

``render.ocsd`` writes the line format of OpenCSD's ``trc_pkt_lister`` so that
a listing can be compared line for line with the reference decoder's output.
"""
