"""A small corpus of ordinary notes, written for this package, that stands in for a new index's own.

``calibration.py`` measures how unrelated questions score against an index's chunks; an index of four
notes gives four vectors, which say little about a model (a paraphrase that a larger index scores
well above the noise scored under ``minScore`` there). These notes are what a personal or work memory
typically holds: plans, people, errands, in several languages, one line each as a daily log writes
them, and on none of the calibration probes' topics. Each index embeds them once per model (as
documents, like its chunks) and counts them as this many chunks beside its own, so their weight
fades as the index grows. Written for sessionmem; no benchmark text is in them.
"""

from __future__ import annotations

REFERENCE_NOTES: tuple[str, ...] = (
    "- Standup moved to 9:30 from next week; Marta will run it while Jonas is on leave.",
    "- The staging database ran out of disk overnight; rotated the logs and added an alert at 80%.",
    "- Decided to keep the old login page until the new design passes the accessibility review.",
    "- Onboarding checklist for new hires: laptop, badge, VPN access, a buddy for the first month.",
    "- Quarterly planning: the team commits to the search rewrite and one week of bug fixing.",
    "- Customer in Lyon reported slow exports; reproduced with a 40 MB file, fix scheduled for Friday.",
    "- Code review habit: small pull requests, one reviewer, merge within a day.",
    "- Interview notes: strong on systems design, less on testing; second round with the platform team.",
    "- The printer on the third floor needs a new toner; facilities ticket opened.",
    "- Budget for the conference trip approved: two people, economy flights, three hotel nights.",
    "- My sister's birthday is on 14 June; she likes pottery and green tea.",
    "- Grandma's recipe for plum dumplings is in the blue notebook in the kitchen drawer.",
    "- Dentist appointment for the kids every six months; next check-up in October.",
    "- Neighbours on the left are away in August and asked us to water their plants.",
    "- Anniversary dinner: we liked the small Greek place on Elm Street, book a table early.",
    "- Leo started swimming lessons on Saturdays at 10; bring goggles and a towel.",
    "- Dad prefers phone calls on Sunday evenings; he does not read messages.",
    "- Started running three times a week; knee feels fine if I stretch before.",
    "- Doctor said to cut down on coffee after 2 pm to sleep better.",
    "- Allergy season: take the antihistamine in the morning, not at night.",
    "- Learning to play the guitar: practise chord changes ten minutes a day.",
    "- Book club picked a historical novel for March; meeting at Sam's place.",
    "- The garden hose leaks at the tap connector; buy a new washer.",
    "- Car service due at 60,000 km; the garage on Mill Road was cheaper last time.",
    "- Internet contract ends in May; compare offers before it renews automatically.",
    "- Electricity meter reading 48213 on the first of the month.",
    "- Spare house key is with the neighbour at number 12.",
    "- Saving for a new sofa; aim to put aside 100 a month until spring.",
    "- Gym membership renews in January; cancel if I have not gone in December.",
    "- Packing list for hiking: rain jacket, headlamp, first aid kit, water filter.",
    "- Flight to the wedding lands at 18:40; a friend picks us up at the airport.",
    "- Photos from the summer trip are backed up on the external drive, folder 2024-summer.",
    "- Favourite podcast episodes about habit building saved in the listening app.",
    "- Volunteered for the school fair: baking stand from 2 to 4 pm.",
    "- Password manager holds the shared family accounts; the recovery kit is in the safe.",
    "- Noticed the bike's brakes squeak in the rain; ask at the shop next time.",
    "- Ideas for the blog: debugging stories, notes on reading papers, a post about note taking.",
    "- Mentoring session with Ravi: he wants to move from support to engineering within a year.",
    "- Team lunch vote: tacos won; Thursday at 12:30.",
    "- Release notes draft shared with product for feedback before the announcement.",
    "- Réunion avec le fournisseur reportée à mardi; apporter les devis signés.",
    "- Termin beim Steuerberater am Montag um zehn; Belege vom letzten Jahr mitnehmen.",
    "- Comprar regalo para la boda de Lucía antes del viernes.",
    "- 来週の月曜日に歯医者の予約があります。",
    "- 周五下午和同事讨论新项目的时间表。",
    "- Lembrar de renovar o seguro do apartamento em setembro.",
    "- Obiad u rodziców w niedzielę o trzynastej.",
    "- Il corso di fotografia inizia a ottobre, il giovedì sera.",
)
